// Ape-X over MPI, rank 0's side (rl/mpi/apex_mpi.cpp has the protocol and the set-up): the
// learner loop of rl/apex_loop.h on a thread of its own, the central prioritized replay fed by
// the actor ranks, their grants and weights, and the run's checkpoints, evaluation, metrics and
// progress. Only this rank's main thread calls MPI.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <thread>

#include "looptool/ir/error.h"
#include "rl/apex_loop.h"
#include "rl/mpi/apex_mpi.h"
#include "rl/mpi/mpi_comm.h"
#include "rl/mpi/mpi_transport.h"
#include "rl/training_run.h"

namespace looptune::apex_mpi {

namespace {

// The learner loop's link publishes flattened weights for this main thread to send.
struct Published {
    std::mutex mutex;
    std::vector<float> weights;
    int64_t version = 0;
};

struct PeerState {
    bool bye = false;
    int64_t env_steps = 0, granted = 0;  // in this run
};

class RankZero final : public LearnerLink {
public:
    RankZero(const mpi::Session &world, TrainingRun &run, Environment &eval_env,
             const QNetConfig &net_config, Learner &learner, PrioritizedReplay &replay,
             const std::vector<Demo> &demos)
        : world_(world),
          run_(run),
          c_(run.config()),
          eval_env_(eval_env),
          learner_(learner),
          replay_(replay),
          demos_(demos),
          snapshot_(net_config),
          pace_(c_, run.start_steps(), learner.updates, replay),
          env_steps_(run.start_steps()),
          episodes_(run.start_episodes()),
          peers_(world.size),
          silence_(world.size) {}
    TrainSummary run();

    // LearnerLink, called from the learner thread.
    bool stopping() const override { return learner_stop_; }
    int64_t env_steps() const override { return env_steps_; }
    void publish(const QNet &online) override {
        std::vector<float> w = flat_weights(online);
        std::lock_guard<std::mutex> g(published_.mutex);
        published_.weights = std::move(w);
        ++published_.version;
    }

private:
    // run()'s steps.
    void start_learner();
    /// Until the run ends or fails: takes the ranks' messages, sends weights and grants, and
    /// checkpoints, evaluates, records and reports at their intervals.
    void serve();
    /// Stops every actor rank, then the learner (its state is what gets saved), and waits for
    /// each rank's Bye so no message is left in flight.
    void stop_ranks();
    /// The last checkpoint, evaluation, metrics row and report; rethrows a failure.
    TrainSummary finish();

    void receive_all();
    void send_weights();
    void grant(bool heartbeat);
    void checkpoint();
    /// Before the job ends abnormally: a checkpoint of what the learner has (unless it failed)
    /// and how to go on.
    std::string save_for_resume(const std::string &why);
    void stop_learner() {
        learner_stop_ = true;
        if (learner_thread_.joinable()) learner_thread_.join();
    }
    const RunSnapshot &snapshot();
    void start_evaluation();
    /// Collects an evaluation that has finished; true if one has.
    bool evaluation_done();
    std::string who() const {
        return fmt::format("{} actor ranks x {}", world_.size - 1, c_.actors);
    }

    const mpi::Session &world_;
    TrainingRun &run_;
    const TrainConfig &c_;
    Environment &eval_env_;
    Learner &learner_;
    PrioritizedReplay &replay_;
    const std::vector<Demo> &demos_;
    QNet snapshot_;  // the weights an evaluation runs on
    ApexPace pace_;
    std::atomic<int64_t> env_steps_, episodes_;
    std::vector<PeerState> peers_;
    mpi::SilenceClock silence_;
    mpi::Outgoing out_;
    std::mutex learner_mutex_;  // checkpoints and snapshots between updates
    std::atomic<bool> learner_stop_{false};
    std::thread learner_thread_;
    FirstError learner_error_, error_;  // error_: an actor rank's failure, or the evaluation's
    Published published_;
    int64_t sent_version_ = 0, granted_ = 0;
    RunningMean episode_reward_, episode_speedup_;
    RunSnapshot at_;
    std::future<Evaluation> evaluation_;
};

const RunSnapshot &RankZero::snapshot() {
    at_.env_steps = env_steps_;
    at_.episodes = episodes_;
    at_.updates = pace_.updates;
    at_.loss = pace_.loss;
    at_.epsilon = c_.apex_eps;
    at_.episode_reward = episode_reward_.mean();
    at_.episode_speedup = episode_speedup_.mean();
    return at_;
}

void RankZero::checkpoint() {
    std::lock_guard<std::mutex> g(learner_mutex_);
    snapshot();
    at_.updates = learner_.updates;
    run_.checkpoint(learner_, at_,
                    {{"distributed", "mpi"},
                     {"ranks", world_.size},
                     {"actors", (world_.size - 1) * c_.actors}});
}

std::string RankZero::save_for_resume(const std::string &why) {
    std::string saved = "the last checkpoint in " + c_.out_dir + " is intact";
    if (learner_error_.empty()) {
        try {
            checkpoint();
            saved = fmt::format("checkpoint at step {} written to {}", env_steps_.load(),
                                run_.checkpoint_path);
        } catch (const std::exception &e) {
            saved += fmt::format(" (a new one could not be written: {})", e.what());
        }
    }
    return fmt::format("{}; {}: rerun the same command with --resume to continue", why, saved);
}

void RankZero::receive_all() {
    int from = 0, tag = 0;
    std::vector<char> bytes;
    std::vector<Transition> ts;
    std::vector<float> priorities;
    silence_.poll();
    for (int n = 0; n < 1024 && mpi::try_receive(MPI_ANY_SOURCE, &from, &tag, &bytes); ++n) {
        silence_.heard(from);
        if (tag == kTransitions) {
            decode_transitions(bytes, &ts, &priorities);
            for (size_t i = 0; i < ts.size(); ++i) replay_.add(std::move(ts[i]), priorities[i]);
        } else if (tag == kStatus) {
            const ActorStatus s = decode_status(bytes);
            env_steps_ += s.env_steps;
            peers_[from].env_steps += s.env_steps;
            episodes_ += s.episodes;
            for (size_t i = 0; i < s.episode_rewards.size(); ++i) {
                episode_reward_.push(s.episode_rewards[i]);
                episode_speedup_.push(s.episode_speedups[i]);
            }
        } else if (tag == kFailed) {
            try {
                std::rethrow_exception(error_from_text(decode_text(bytes)));
            } catch (...) {
                error_.capture(fmt::format("rank {}", from));
            }
        } else if (tag == kBye) {
            peers_[from].bye = true;
        }
    }
    out_.progress();
    for (int r = 1; r < world_.size; ++r)
        if (!peers_[r].bye &&
            silence_.silent(r) > c_.mpi_timeout) {  // stop learning, save, end the job
            stop_learner();
            mpi::abort_job(save_for_resume(fmt::format(
                "rank {} has been silent for {:.0f} s (dead or hung?); aborting the job", r,
                silence_.silent(r))));
        }
}

void RankZero::send_weights() {
    std::vector<char> bytes;
    {
        std::lock_guard<std::mutex> g(published_.mutex);
        if (published_.version == sent_version_) return;
        sent_version_ = published_.version;
        bytes = encode_weights(sent_version_, published_.weights);
    }
    for (int r = 1; r < world_.size; ++r)
        if (out_.pending(r, kWeights) == 0) out_.send(r, kWeights, bytes);
}

void RankZero::grant(bool heartbeat) {
    // What may still be granted: never past --steps, nor past the replay ratio's pace.
    pace_.observe();
    const int64_t slack = kPaceSlackPerActor * c_.actors * (world_.size - 1);
    const int64_t limit = std::min(c_.steps, pace_.step_limit(slack));
    for (int r = 1; r < world_.size; ++r) {
        const int64_t window = kGrantPerActor * c_.actors,
                      ahead = peers_[r].granted - peers_[r].env_steps;
        const int64_t room = std::max<int64_t>(0, limit - run_.start_steps() - granted_);
        const int64_t more = ahead < window / 2 ? std::min(window - ahead, room) : 0;
        peers_[r].granted += more;
        granted_ += more;
        if (more > 0 || heartbeat) out_.send(r, kGrant, encode_grant(peers_[r].granted));
    }
}

// Evaluation runs beside the main thread, which must keep serving the ranks: its result goes
// into the metrics row written when it finishes, for the weights at its start.
void RankZero::start_evaluation() {
    {
        std::lock_guard<std::mutex> g(learner_mutex_);
        copy_weights(snapshot_, learner_.online);
    }
    evaluation_ = std::async(std::launch::async, [this] {
        torch::set_num_threads(1);
        return run_.evaluate(snapshot_, eval_env_);
    });
}

TrainSummary RankZero::run() {
    start_learner();
    // SIGTERM: mpirun ending the job because another rank died, or Slurm at a time limit.
    mpi::SigtermWatch sigterm([this] {
        const std::string message = save_for_resume(
            "rank 0 got SIGTERM (from mpirun when another rank died, or from Slurm)");
        fmt::print(stderr, "error: {}\n", message);
        std::fflush(stderr);
        std::_Exit(128 + SIGTERM);
    });
    try {
        serve();
    } catch (...) {
        error_.capture("rank 0");
    }
    stop_ranks();
    return finish();
}

void RankZero::start_learner() {
    learner_thread_ = std::thread([this] {
        try {
            run_apex_learner(c_, learner_, replay_, demos_, learner_mutex_, pace_, *this);
        } catch (...) {
            learner_error_.capture("learner");
            learner_stop_ = true;
        }
    });
}

void RankZero::serve() {
    int64_t next_checkpoint = (env_steps_ / c_.checkpoint_every + 1) * c_.checkpoint_every;
    int64_t next_eval =
        c_.eval_every > 0 ? (env_steps_ / c_.eval_every + 1) * c_.eval_every : INT64_MAX;
    int64_t next_row = env_steps_ + 250;
    double last_heartbeat = 0;
    const std::string who = this->who();
    for (;;) {
        receive_all();
        if (!learner_error_.empty() || !error_.empty() || env_steps_ >= c_.steps ||
            run_.out_of_time())
            break;
        send_weights();
        const bool heartbeat = now() - last_heartbeat >= kHeartbeatSeconds;
        grant(heartbeat);
        if (heartbeat) last_heartbeat = now();
        const int64_t steps = env_steps_;
        if (steps >= next_checkpoint) {
            checkpoint();
            next_checkpoint = (steps / c_.checkpoint_every + 1) * c_.checkpoint_every;
        }
        const bool evaluated = evaluation_done();
        if (!evaluated && steps >= next_eval && !evaluation_.valid()) {
            start_evaluation();
            next_eval = (steps / c_.eval_every + 1) * c_.eval_every;
        }
        if (steps >= next_row || evaluated) {
            run_.record(snapshot(), evaluated);
            next_row = steps + 250;
        }
        run_.report(snapshot(), who);
        std::this_thread::sleep_for(kPoll);
    }
}

bool RankZero::evaluation_done() {
    if (!evaluation_.valid() ||
        evaluation_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        return false;
    at_.eval = evaluation_.get();
    return true;
}

void RankZero::stop_ranks() {
    for (int r = 1; r < world_.size; ++r) out_.send(r, kStop, encode_text(""));
    stop_learner();
    for (;;) {
        receive_all();
        bool all = true;
        for (int r = 1; r < world_.size; ++r) all = all && peers_[r].bye;
        if (all) break;
        std::this_thread::sleep_for(kPoll);
    }
    out_.drain(c_.mpi_timeout);
}

TrainSummary RankZero::finish() {
    if (evaluation_.valid()) {
        try {
            at_.eval = evaluation_.get();
        } catch (...) {
            error_.capture("evaluation");
        }
    }
    if (learner_error_.empty()) {
        checkpoint();
        if (error_.empty()) {
            at_.eval = run_.evaluate(learner_.online, eval_env_);
            run_.record(snapshot(), true);
        }
    }
    const bool failed = !learner_error_.empty() || !error_.empty();
    run_.report(snapshot(), who(), true, failed ? "stopped" : "done");
    if (!learner_error_.empty())
        learner_error_.rethrow(
            fmt::format("{}; the last checkpoint in {} is intact: rerun with --resume to continue",
                        error_.empty() ? "" : "; also " + error_.where(), c_.out_dir));
    if (!error_.empty())
        error_.rethrow("; checkpoint written to " + run_.checkpoint_path +
                       ": rerun with --resume to continue");
    at_.updates = learner_.updates;
    return run_.summary(at_);
}

}  // namespace

TrainSummary rank_zero(const mpi::Session &world, TrainingRun &run, Environment &eval_env,
                       const QNetConfig &net_config, Learner &learner, PrioritizedReplay &replay,
                       const std::vector<Demo> &demos) {
    RankZero zero(world, run, eval_env, net_config, learner, replay, demos);
    return zero.run();
}

}  // namespace looptune::apex_mpi
