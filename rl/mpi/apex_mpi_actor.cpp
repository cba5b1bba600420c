// Ape-X over MPI, the actor ranks' side (rl/mpi/apex_mpi.cpp has the protocol and rank 0): the
// actor loop of rl/apex_loop.h on threads whose link is this rank's main thread, which
// alone talks to MPI: it forwards transitions and status, takes weights and grants.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>

#include "looptool/ir/error.h"
#include "rl/apex_loop.h"
#include "rl/mpi/apex_mpi.h"
#include "rl/mpi/mpi_transport.h"

namespace looptune::apex_mpi {

std::vector<float> flat_weights(const QNet &net) {
    torch::NoGradGuard no_grad;
    std::vector<float> out;
    auto append = [&](const torch::Tensor &t) {
        torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
        out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    };
    for (const torch::Tensor &p : net->parameters()) append(p);
    for (const torch::Tensor &b : net->buffers()) append(b);
    return out;
}

void set_flat_weights(QNet &net, const std::vector<float> &w) {
    torch::NoGradGuard no_grad;
    size_t at = 0;
    auto take = [&](torch::Tensor t) {
        const size_t n = t.numel();
        if (at + n > w.size())
            throw looptool::Error("MPI: the learner's weights do not fit this rank's network");
        t.copy_(torch::from_blob(const_cast<float *>(w.data() + at), t.sizes(), torch::kFloat)
                    .to(t.dtype()));
        at += n;
    };
    for (torch::Tensor p : net->parameters()) take(p);
    for (torch::Tensor b : net->buffers()) take(b);
    if (at != w.size())
        throw looptool::Error("MPI: the learner's weights do not fit this rank's network");
}

namespace {

struct ActorSide {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> env_steps{0};            // taken on this rank in this run
    std::atomic<int64_t> claimed{0}, granted{0};  // steps claimed by actors; allowed by rank 0
    std::mutex mutex;                             // guards the rest
    std::condition_variable room;                 // the outbox has room, or stop
    std::deque<std::vector<char>> outbox;         // encoded transition batches
    ActorStatus finished;                         // episodes since the last status
    QNet net{nullptr};                            // the latest weights received
    int64_t version = 0;
    FirstError error;
};

class RankActorLink final : public ActorLink {
public:
    explicit RankActorLink(ActorSide &side) : s_(side) {}
    bool stopping() const override { return s_.stop; }
    bool claim_step() override {
        int64_t claimed = s_.claimed;
        while (claimed < s_.granted)
            if (s_.claimed.compare_exchange_weak(claimed, claimed + 1)) return true;
        return false;
    }
    void release_step() override { --s_.claimed; }
    void step_taken() override { ++s_.env_steps; }
    void refresh(QNet &net, int64_t *version) override {
        std::lock_guard<std::mutex> g(s_.mutex);
        if (s_.version == *version) return;
        copy_weights(net, s_.net);
        *version = s_.version;
    }
    void send(std::vector<Transition> &ts, const std::vector<float> &priorities) override {
        std::vector<char> bytes = encode_transitions(ts, priorities);
        std::unique_lock<std::mutex> g(s_.mutex);
        s_.room.wait(g, [&] { return s_.outbox.size() < kOutboxLimit || s_.stop; });
        s_.outbox.push_back(std::move(bytes));
    }
    void episode_done(double reward, double speedup) override {
        std::lock_guard<std::mutex> g(s_.mutex);
        ++s_.finished.episodes;
        s_.finished.episode_rewards.push_back(static_cast<float>(reward));
        s_.finished.episode_speedups.push_back(static_cast<float>(speedup));
    }

private:
    ActorSide &s_;
};

/// This rank's main thread, the only one that talks to MPI: weights and grants from rank 0 to
/// the actors, their transitions, status (also the heartbeat) and failure to rank 0.
class RankMain {
public:
    RankMain(const mpi::Session &world, const TrainConfig &c, ActorSide &side)
        : world_(world), c_(c), side_(side) {}

    /// Until rank 0 says stop.
    void serve() {
        for (;;) {
            if (receive()) break;
            report_failure();
            out_.progress();
            forward_transitions();
            if (now() - last_status_ >= kHeartbeatSeconds || side_.env_steps != reported_)
                send_status();
            if (root_.silent(0) > c_.mpi_timeout) {
                side_.stop = true;
                mpi::abort_job(fmt::format(
                    "rank {}: nothing from rank 0 (the learner) for {:.0f} s; aborting the job. "
                    "Rerun with --resume to continue from the last checkpoint",
                    world_.rank, root_.silent(0)));
            }
            std::this_thread::sleep_for(kPoll);
        }
    }

    /// Stop: the actors finish their step (one can take long: a big kernel to compile and time)
    /// while this thread goes on with the heartbeat; then the last steps, then Bye.
    void finish(std::vector<std::thread> &threads, const std::atomic<int> &running) {
        {
            std::lock_guard<std::mutex> g(side_.mutex);
            side_.stop = true;
        }
        side_.room.notify_all();
        while (running > 0) {
            out_.progress();
            if (now() - last_status_ >= kHeartbeatSeconds) send_status();
            std::this_thread::sleep_for(kPoll);
        }
        for (std::thread &t : threads) t.join();
        send_status();
        out_.send(0, kBye, encode_text(""));
        if (!out_.drain(c_.mpi_timeout))
            mpi::abort_job(fmt::format(
                "rank {}: rank 0 took none of its last messages for {:.0f} s; aborting the job",
                world_.rank, c_.mpi_timeout));
    }

private:
    /// Takes rank 0's messages; true when one says stop.
    bool receive() {
        int from = 0, tag = 0;
        std::vector<char> bytes;
        root_.poll();
        while (mpi::try_receive(0, &from, &tag, &bytes)) {
            root_.heard(0);
            if (tag == kWeights) {
                int64_t version = 0;
                std::vector<float> w = decode_weights(bytes, &version);
                std::lock_guard<std::mutex> g(side_.mutex);
                set_flat_weights(side_.net, w);
                side_.version = version;
            } else if (tag == kGrant) {
                side_.granted = std::max<int64_t>(side_.granted, decode_grant(bytes));
            } else if (tag == kStop) {
                return true;
            }
        }
        return false;
    }
    void report_failure() {
        if (side_.error.empty() || failure_sent_) return;
        out_.send(0, kFailed,
                  encode_text(side_.error.where() + ": " + error_text(side_.error.get())));
        failure_sent_ = true;
    }
    /// The actors' transition batches, at most kMaxInFlight in flight.
    void forward_transitions() {
        for (;;) {
            std::vector<char> batch;
            {
                std::lock_guard<std::mutex> g(side_.mutex);
                if (side_.outbox.empty() || out_.pending(0, kTransitions) >= kMaxInFlight) break;
                batch = std::move(side_.outbox.front());
                side_.outbox.pop_front();
            }
            side_.room.notify_one();
            out_.send(0, kTransitions, std::move(batch));
        }
    }
    void send_status() {
        ActorStatus s;
        {
            std::lock_guard<std::mutex> g(side_.mutex);
            std::swap(s, side_.finished);
        }
        const int64_t steps = side_.env_steps;
        s.env_steps = steps - reported_;
        reported_ = steps;
        out_.send(0, kStatus, encode_status(s));
        last_status_ = now();
    }

    const mpi::Session &world_;
    const TrainConfig &c_;
    ActorSide &side_;
    mpi::Outgoing out_;
    int64_t reported_ = 0;
    double last_status_ = 0;
    mpi::SilenceClock root_{1};
    bool failure_sent_ = false;
};

}  // namespace

TrainSummary actor_rank(const mpi::Session &world, const TrainConfig &c, const Dataset &dataset,
                        const QNetConfig &net_config, const std::vector<float> &weights,
                        int64_t start_steps) {
    ActorSide side;
    side.net = QNet(net_config);
    set_flat_weights(side.net, weights);
    RankActorLink link(side);
    std::vector<std::thread> threads;
    std::atomic<int> running{c.actors};
    for (int t = 0; t < c.actors; ++t) {
        const int id = (world.rank - 1) * c.actors + t;
        threads.emplace_back([&, id] {
            try {
                run_apex_actor(id, (world.size - 1) * c.actors, c, dataset, net_config, start_steps,
                               link);
            } catch (...) {
                side.error.capture(fmt::format("actor {}", id));
                side.stop = true;
                side.room.notify_all();
            }
            --running;
        });
    }

    RankMain main_thread(world, c, side);
    try {
        main_thread.serve();
    } catch (const std::exception &e) {
        // The learner would wait for this rank until its timeout: end the job now (rank 0
        // checkpoints on the SIGTERM that follows).
        mpi::abort_job(fmt::format("rank {}: {}", world.rank, e.what()));
    }
    main_thread.finish(threads, running);
    TrainSummary s;
    s.primary = false;
    s.env_steps = side.env_steps;
    return s;
}

}  // namespace looptune::apex_mpi
