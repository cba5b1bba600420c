// Ape-X across MPI ranks (`looptool train --trainer apex --distributed mpi`, under mpirun or
// srun): the actor and learner loops of rl/apex_loop.h, linked over MPI instead of threads.
//
//   rank 0      the learner: central prioritized replay, learner thread, checkpoints,
//               evaluation, metrics and progress; the only rank that writes the run directory.
//   rank r > 0  config.actors actor threads, each with its own Environment and JIT, acting with
//               apex_epsilon(i, N) over the global actor index i = (r - 1) * actors + t of
//               N = (ranks - 1) * actors actors; the measurement store (--store, default
//               RUN_DIR/store.sqlite) is shared by the ranks of a node.
//
// Messages: the tags in rl/mpi/apex_mpi.h (a table of when each is sent: docs/distributed.md).
// Only each rank's main thread calls MPI (MPI_THREAD_FUNNELED; rl/mpi/mpi_comm.h); actor and
// learner threads talk to it through queues. Waits poll with short sleeps, since ranks share
// cores. A rank silent for config.mpi_timeout seconds ends the run: rank 0 writes a checkpoint,
// says how to resume and aborts the job; SIGTERM on rank 0 (what mpirun sends when another rank
// dies, and what Slurm sends at a time limit) does the same. docs/distributed.md ("MPI").
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <optional>
#include <thread>

#include "looptool/ir/error.h"
#include "rl/apex_loop.h"
#include "rl/demonstrations.h"
#include "rl/mpi/apex_mpi.h"
#include "rl/mpi/mpi_comm.h"
#include "rl/mpi/mpi_transport.h"
#include "rl/mpi/node_stores.h"
#include "rl/training_run.h"

namespace looptune {

namespace {

using namespace apex_mpi;

// ---------------------------------------------------------------------------------------------
// Rank 0: the learner loop's link publishes flattened weights for this main thread to send.

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
    learner_thread_ = std::thread([this] {
        try {
            run_apex_learner(c_, learner_, replay_, demos_, learner_mutex_, pace_, *this);
        } catch (...) {
            learner_error_.capture("learner");
            learner_stop_ = true;
        }
    });
    // SIGTERM: mpirun ending the job because another rank died, or Slurm at a time limit.
    mpi::SigtermWatch sigterm([this] {
        const std::string message = save_for_resume(
            "rank 0 got SIGTERM (from mpirun when another rank died, or from Slurm)");
        fmt::print(stderr, "error: {}\n", message);
        std::fflush(stderr);
        std::_Exit(128 + SIGTERM);
    });

    int64_t next_checkpoint = (env_steps_ / c_.checkpoint_every + 1) * c_.checkpoint_every;
    int64_t next_eval =
        c_.eval_every > 0 ? (env_steps_ / c_.eval_every + 1) * c_.eval_every : INT64_MAX;
    int64_t next_row = env_steps_ + 250;
    double last_heartbeat = 0;
    const std::string who = fmt::format("{} actor ranks x {}", world_.size - 1, c_.actors);
    try {
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
            bool evaluated = false;
            if (evaluation_.valid() &&
                evaluation_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
                at_.eval = evaluation_.get();
                evaluated = true;
            } else if (steps >= next_eval && !evaluation_.valid()) {
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
    } catch (...) {
        error_.capture("rank 0");
    }

    // Stop every actor rank, then the learner (its state is what gets saved), and wait for each
    // rank's Bye so no message is left in flight.
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
    run_.report(snapshot(), who, true, failed ? "stopped" : "done");
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

TrainSummary train_apex_mpi(const TrainConfig &config) {
    if (config.mpi_timeout <= 0) throw looptool::Error("--mpi-timeout must be positive");
    mpi::Session world;
    const std::vector<std::string> hosts = mpi::host_names();
    TrainConfig c = config;
    c.store_path = store_for_host(config.store_path, hosts[size_t(world.rank)]);
    if (world.size < 2)
        throw looptool::Error(
            "--distributed mpi needs at least 2 MPI processes (mpirun -np 2 or more, or srun): "
            "rank 0 learns, every other rank acts");
    // Every step below may fail on some ranks: all learn the first error; rank 0 reports it
    // (with its class), the others leave quietly and rank 0's exit status fails the job.
    std::string error;
    auto fail_together = [&] {
        const std::string first = mpi::first_error(world, error);
        if (first.empty()) return false;
        if (world.rank == 0) std::rethrow_exception(error_from_text(first));
        return true;
    };
    auto capture = [&] { error = error_text(std::current_exception()); };
    TrainSummary quiet;
    quiet.primary = false;

    // 1. The settings and the dataset, then rank 0 claims the run directory (which holds the
    // default store): nothing is created before every input has been read.
    std::optional<TrainingRun> run;
    try {
        if (c.store_path.empty() &&
            std::any_of(hosts.begin(), hosts.end(), [&](auto &h) { return h != hosts[0]; }))
            throw looptool::Error(
                "--distributed mpi over several hosts needs --store with a node-local path (the "
                "same on every node, e.g. /tmp/looptune_store.sqlite): SQLite's WAL store cannot "
                "be shared across hosts");
        run.emplace(c);
        if (world.rank == 0) run->create_dir();
    } catch (...) {
        capture();
    }
    if (fail_together()) return quiet;

    // 2. The first rank on each host opens (and may create) the store before the others: several
    // processes creating one SQLite file at once can fail with "database is locked".
    std::unique_ptr<Environment> env;  // rank 0: the evaluation's
    const bool first_on_host =
        std::find(hosts.begin(), hosts.end(), hosts[world.rank]) - hosts.begin() == world.rank;
    try {
        if (first_on_host) env = std::make_unique<Environment>(train_env_config(c));
    } catch (...) {
        capture();
    }
    if (fail_together()) return quiet;

    // 3. Every rank: environment, network shape; rank 0 also the learner and replay, the
    // checkpoint when resuming, and the warm start.
    QNetConfig net_config;
    std::unique_ptr<Learner> learner;
    std::unique_ptr<PrioritizedReplay> replay;
    std::vector<Demo> demos;
    std::vector<float> weights;
    try {
        if (!env) env = std::make_unique<Environment>(train_env_config(c));
        net_config = net_config_for(c, *env);
        if (world.rank == 0) {
            learner = std::make_unique<Learner>(c, net_config);
            replay = std::make_unique<PrioritizedReplay>(c.replay_capacity, c.per_alpha, c.seed);
            run->start(*learner);
            if (!c.warmstart.empty()) {
                demos = load_demonstrations(c, *env, *replay, c.graph());
                if (!run->resumed()) pretrain_on_demonstrations(c, *learner, *replay, demos);
            }
            weights = flat_weights(learner->online);
        } else {
            weights = flat_weights(QNet(net_config));  // the size, to check rank 0's against
        }
    } catch (...) {
        capture();
    }
    if (fail_together()) return quiet;

    // 4. Rank 0's starting point (step count and weights) to everyone.
    int64_t start[2] = {world.rank == 0 ? run->start_steps() : 0,
                        static_cast<int64_t>(weights.size())};
    mpi::bcast(start, 2, MPI_INT64_T, 0);
    if (start[1] != static_cast<int64_t>(weights.size()))
        error =
            fmt::format("its network has {} weights, rank 0's {} (different builds or settings?)",
                        weights.size(), start[1]);
    if (fail_together()) return quiet;
    mpi::bcast(weights.data(), static_cast<int>(weights.size()), MPI_FLOAT, 0);
    const int num_actors = (world.size - 1) * c.actors;
    if (world.rank == 0)
        run->note(fmt::format("MPI: rank 0 learns, {} ranks x {} actors act (eps {:.3g} .. {:.3g})",
                              world.size - 1, c.actors, apex_epsilon(c, 0, num_actors),
                              apex_epsilon(c, num_actors - 1, num_actors)));

    TrainSummary summary;
    if (world.rank != 0) {
        summary = actor_rank(world, c, run->dataset(), net_config, weights, start[0]);
    } else {
        run->loop_started(learner->updates);
        RankZero zero(world, *run, *env, net_config, *learner, *replay, demos);
        summary = zero.run();
    }
    merge_node_stores(world, c, hosts);
    return summary;
}

}  // namespace looptune
