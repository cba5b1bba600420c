// Ape-X across MPI ranks (`looptool train --trainer apex --distributed mpi`, under mpirun or
// srun), the same algorithm as agents/apex.cpp with actors in other processes:
//
//   rank 0      the learner: central prioritized replay, learner thread, checkpoints,
//               evaluation, metrics and progress; the only rank that writes the run directory.
//   rank r > 0  config.actors actor threads, each with its own Environment and JIT, acting with
//               eps_i = eps^(1 + alpha * i / (N - 1)) over the global actor index
//               i = (r - 1) * actors + t of N = (ranks - 1) * actors actors; the measurement store
//               (--store, default RUN_DIR/store.sqlite) is shared by the ranks of a node.
//
// Messages (agents/mpi_transport.h), point to point on MPI_COMM_WORLD. Every receive takes any
// tag, so the messages from one rank are received in the order they were sent.
//   actor rank -> 0  Transitions  16 n-step transitions with the actor's initial priorities
//                    Status       env steps and episodes since the last one: after new steps
//                                 (so rank 0's count and its grants stay current), and at
//                                 least every half second, so it is also the heartbeat
//                    Failed       an actor thread's error; the rank then waits for Stop
//                    Bye          after Stop: the rank's last message
//   0 -> actor rank  Weights      every weight_sync updates (a rank still receiving the previous
//                                 publication skips one); actors poll for them
//                    Grant        how many steps the rank may have taken in all: topped up to
//                                 64 per actor ahead of what it reported, never past --steps
//                                 in total (so the run takes exactly --steps); also sent every
//                                 half second as the heartbeat
//                    Stop         the last message: total steps reached, time out, or an error
// Only each rank's main thread calls MPI (MPI_THREAD_FUNNELED; the MPI plumbing is in
// agents/mpi_comm.h); actor and learner threads talk to it through queues. Waits poll with short sleeps instead of spinning in MPI, since ranks
// share cores. A rank silent for config.mpi_timeout seconds ends the run: rank 0 writes a
// checkpoint, says how to resume and aborts the job; SIGTERM on rank 0 (what mpirun sends when
// another rank dies, and what Slurm sends at a time limit) does the same. docs/distributed.md
// ("MPI") has what OpenMPI does when a rank dies.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <future>
#include <optional>
#include <thread>

#include "agents/learner.h"
#include "agents/mpi_comm.h"
#include "agents/mpi_transport.h"
#include "env/measurement_store.h"
#include "looptool/error.h"
#include "looptool/text_format.h"

namespace looptune {

TrainSummary train_apex_mpi(const TrainConfig &config);

namespace {

enum Tag : int { kTransitions = 1, kStatus, kFailed, kBye, kWeights, kGrant, kStop, kStore, kStoreFailed };

constexpr double kHeartbeatSeconds = 0.5;
constexpr size_t kMaxInFlight = 8;       // transition batches an actor rank sends at once
constexpr size_t kOutboxLimit = 64;      // batches queued on an actor rank before its actors wait
constexpr int64_t kGrantPerActor = 64;   // steps granted ahead per actor
constexpr auto kPoll = std::chrono::milliseconds(2);

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Every parameter and buffer of `net`, in registration order, as one vector.
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
        if (at + n > w.size()) throw looptool::Error("MPI: the learner's weights do not fit this rank's network");
        t.copy_(torch::from_blob(const_cast<float *>(w.data() + at), t.sizes(), torch::kFloat).to(t.dtype()));
        at += n;
    };
    for (torch::Tensor p : net->parameters()) take(p);
    for (torch::Tensor b : net->buffers()) take(b);
    if (at != w.size()) throw looptool::Error("MPI: the learner's weights do not fit this rank's network");
}

double global_epsilon(const TrainConfig &c, int i, int n) {
    if (n <= 1) return c.apex_eps;
    return std::pow(c.apex_eps, 1 + c.apex_alpha * i / double(n - 1));
}

// ---------------------------------------------------------------------------------------------
// Actor ranks.

/// What an actor rank's threads share with its main thread, which alone talks to MPI.
struct ActorSide {
    std::atomic<bool> stop{false};
    std::atomic<int64_t> env_steps{0};  // taken on this rank in this run
    std::atomic<int64_t> claimed{0}, granted{0};  // steps claimed by actors; allowed by rank 0
    std::mutex mutex;                    // guards the rest
    std::condition_variable room;        // the outbox has room, or stop
    std::deque<std::vector<char>> outbox;  // encoded transition batches
    ActorStatus finished;                  // episodes since the last status (env_steps unused)
    QNet net{nullptr};                     // the latest weights received
    int64_t version = 0;
    std::string error;                     // first actor thread error
};

/// Takes one step of the rank's grant; false when it is used up.
bool claim_step(ActorSide &side) {
    int64_t claimed = side.claimed;
    while (claimed < side.granted)
        if (side.claimed.compare_exchange_weak(claimed, claimed + 1)) return true;
    return false;
}

void run_actor(int id, int num_actors, const TrainConfig &c, const Dataset &dataset, const QNetConfig &net_config,
               int64_t start_steps, ActorSide &side) {
    Environment env(train_env_config(c));
    const bool graph = c.encoder == "gnn";
    QNet net(net_config);
    int64_t version = -1;
    const double eps = global_epsilon(c, id, num_actors);
    std::mt19937_64 rng(c.seed * 1000003 + id * 7919 + start_steps);
    std::uniform_int_distribution<size_t> pick(0, dataset.train.size() - 1);
    std::vector<Transition> outbox;
    auto flush = [&] {
        if (outbox.empty()) return;
        std::vector<float> p = Learner::td_errors(net, outbox);
        std::vector<char> bytes = encode_transitions(outbox, p);
        outbox.clear();
        std::unique_lock<std::mutex> g(side.mutex);
        side.room.wait(g, [&] { return side.outbox.size() < kOutboxLimit || side.stop; });
        side.outbox.push_back(std::move(bytes));
    };
    while (!side.stop) {
        env.reset(dataset.train[pick(rng)]);
        NStepBuilder nstep(c.n_step, c.gamma);
        double ep_reward = 0, base = env.gflops(), best = base;
        bool done = false;
        while (!done && !side.stop) {
            {
                std::lock_guard<std::mutex> g(side.mutex);
                if (side.version != version) {
                    copy_weights(net, side.net);
                    version = side.version;
                }
            }
            if (!claim_step(side)) {  // wait for rank 0 to grant more
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
            }
            const ActedStep step = act_epsilon_greedy(net, env, graph, eps, rng, nstep, &outbox);
            if (!step.acted) {
                --side.claimed;
                break;
            }
            ++side.env_steps;
            done = step.done;
            ep_reward += step.reward;
            best = std::max(best, env.gflops());
            if (outbox.size() >= 16) flush();
        }
        flush();
        if (side.stop) break;  // a cut episode is not counted
        std::lock_guard<std::mutex> g(side.mutex);
        ++side.finished.episodes;
        side.finished.episode_rewards.push_back(static_cast<float>(ep_reward));
        side.finished.episode_speedups.push_back(static_cast<float>(best / std::max(base, 1e-9)));
    }
}

TrainSummary actor_rank(const mpi::Session &world, const TrainConfig &c, const Dataset &dataset,
                        const QNetConfig &net_config, const std::vector<float> &weights, int64_t start_steps) {
    ActorSide side;
    side.net = QNet(net_config);
    set_flat_weights(side.net, weights);
    const int num_actors = (world.size - 1) * c.actors;
    std::vector<std::thread> threads;
    std::atomic<int> running{c.actors};
    for (int t = 0; t < c.actors; ++t) {
        const int id = (world.rank - 1) * c.actors + t;
        threads.emplace_back([&, id] {
            try {
                run_actor(id, num_actors, c, dataset, net_config, start_steps, side);
            } catch (const std::exception &e) {
                std::lock_guard<std::mutex> g(side.mutex);
                if (side.error.empty()) side.error = fmt::format("actor {}: {}", id, e.what());
                side.stop = true;
                side.room.notify_all();
            }
            --running;
        });
    }

    mpi::Outgoing out;
    int64_t reported = 0;
    double last_status = 0;
    mpi::SilenceClock root(1);
    bool failure_sent = false;
    auto send_status = [&] {
        ActorStatus s;
        {
            std::lock_guard<std::mutex> g(side.mutex);
            std::swap(s, side.finished);
        }
        const int64_t steps = side.env_steps;
        s.env_steps = steps - reported;
        reported = steps;
        out.send(0, kStatus, encode_status(s));
        last_status = now();
    };
    try {
        for (bool stop = false; !stop;) {
            int from = 0, tag = 0;
            std::vector<char> bytes;
            root.poll();
            while (!stop && mpi::try_receive(0, &from, &tag, &bytes)) {
                root.heard(0);
                if (tag == kWeights) {
                    int64_t version = 0;
                    std::vector<float> w = decode_weights(bytes, &version);
                    std::lock_guard<std::mutex> g(side.mutex);
                    set_flat_weights(side.net, w);
                    side.version = version;
                } else if (tag == kGrant) {
                    side.granted = std::max<int64_t>(side.granted, decode_grant(bytes));
                } else if (tag == kStop) {
                    stop = true;
                }
            }
            if (stop) break;
            std::string error;
            {
                std::lock_guard<std::mutex> g(side.mutex);
                error = side.error;
            }
            if (!error.empty() && !failure_sent) {
                out.send(0, kFailed, encode_text(error));
                failure_sent = true;
            }
            out.progress();
            for (;;) {
                std::vector<char> batch;
                {
                    std::lock_guard<std::mutex> g(side.mutex);
                    if (side.outbox.empty() || out.pending(0, kTransitions) >= kMaxInFlight) break;
                    batch = std::move(side.outbox.front());
                    side.outbox.pop_front();
                }
                side.room.notify_one();
                out.send(0, kTransitions, std::move(batch));
            }
            const double t = now();
            if (t - last_status >= kHeartbeatSeconds || side.env_steps != reported)
                send_status();
            if (root.silent(0) > c.mpi_timeout) {
                side.stop = true;
                mpi::abort_job(fmt::format("rank {}: nothing from rank 0 (the learner) for {:.0f} s; aborting the job. "
                                      "Rerun with --resume to continue from the last checkpoint",
                                      world.rank, root.silent(0)));
            }
            std::this_thread::sleep_for(kPoll);
        }
    } catch (const std::exception &e) {
        // The learner would wait for this rank until its timeout: end the job now (rank 0
        // checkpoints on the SIGTERM that follows).
        mpi::abort_job(fmt::format("rank {}: {}", world.rank, e.what()));
    }
    // Stop: the actors finish their step (one can take long: a big kernel to compile and time)
    // while this thread goes on with the heartbeat; then the last steps, then Bye.
    {
        std::lock_guard<std::mutex> g(side.mutex);
        side.stop = true;
    }
    side.room.notify_all();
    while (running > 0) {
        out.progress();
        if (now() - last_status >= kHeartbeatSeconds) send_status();
        std::this_thread::sleep_for(kPoll);
    }
    for (std::thread &t : threads) t.join();
    send_status();
    out.send(0, kBye, encode_text(""));
    if (!out.drain(c.mpi_timeout))
        mpi::abort_job(fmt::format("rank {}: rank 0 took none of its last messages for {:.0f} s; aborting the job",
                              world.rank, c.mpi_timeout));
    TrainSummary s;
    s.primary = false;
    s.env_steps = side.env_steps;
    return s;
}

// ---------------------------------------------------------------------------------------------
// Rank 0.

/// The learner's latest weights, flattened by the learner thread for the main thread to send.
struct Published {
    std::mutex mutex;
    std::vector<float> weights;
    int64_t version = 0;
};

struct PeerState {
    bool bye = false;
    int64_t env_steps = 0, granted = 0;  // in this run
};

struct RankZero {
    const mpi::Session &world;
    const TrainConfig &c;
    const RunFiles &files;
    const std::vector<std::string> &evaluation;
    Environment &eval_env;
    const QNetConfig &net_config;
    Learner &learner;
    PrioritizedReplay &replay;
    MetricsLog &metrics;
    const std::vector<Demo> &demos;
    nlohmann::json counters;  // as loaded from the checkpoint (or zeros)
    bool resumed;

    TrainSummary run();
};

TrainSummary RankZero::run() {
    const bool graph = c.encoder == "gnn";
    std::atomic<int64_t> env_steps{counters["env_steps"].get<int64_t>()};
    std::atomic<int64_t> episodes{counters["episodes"].get<int64_t>()};
    const double seconds_before = counters["seconds"];
    const int64_t start_steps = env_steps, updates_at_start = learner.updates;
    const int num_actors = (world.size - 1) * c.actors;
    RunningMean episode_reward, episode_speedup;

    std::atomic<bool> learner_stop{false};
    std::mutex error_mutex, learner_mutex;  // learner_mutex: checkpoints and snapshots between updates
    std::string learner_error;
    std::atomic<double> last_loss{0};
    Published published;
    std::thread learner_thread([&] {
        try {
            RunningMean loss_mean(200);
            while (!learner_stop) {
                const int64_t steps = env_steps;
                const bool ready = replay.size() >= std::min<int64_t>(c.learning_starts, c.replay_capacity);
                if (!ready || learner.updates >= updates_at_start + c.updates_per_step * (steps - start_steps)) {
                    std::this_thread::sleep_for(kPoll);
                    continue;
                }
                loss_mean.push(learner.replay_step(replay, steps, &demos, &learner_mutex));
                last_loss = loss_mean.mean();
                if (learner.updates % c.weight_sync == 0) {
                    std::vector<float> w = flat_weights(learner.online);
                    std::lock_guard<std::mutex> g(published.mutex);
                    published.weights = std::move(w);
                    ++published.version;
                }
            }
        } catch (const std::exception &e) {
            std::lock_guard<std::mutex> g(error_mutex);
            learner_error = std::string("learner: ") + e.what();
            learner_stop = true;
        }
    });
    auto stop_learner = [&] {
        learner_stop = true;
        if (learner_thread.joinable()) learner_thread.join();
    };

    const double t0 = now();
    auto elapsed = [&] { return now() - t0; };
    auto checkpoint = [&] {
        std::lock_guard<std::mutex> g(learner_mutex);
        counters = {{"env_steps", env_steps.load()},
                    {"episodes", episodes.load()},
                    {"seconds", seconds_before + elapsed()}};
        learner.save_checkpoint(files.checkpoint, counters);
        learner.save_policy(files.policy, {{"trainer", "apex"}, {"distributed", "mpi"}, {"ranks", world.size},
                                           {"actors", num_actors}, {"seed", c.seed}, {"env_steps", env_steps.load()},
                                           {"dataset", c.dataset_dir}, {"warmstart", c.warmstart}});
    };
    // Evaluation runs beside the main thread, which must keep serving the ranks: its result goes
    // into the metrics row written when it finishes, for the weights at its start.
    QNet snapshot(net_config);
    std::future<double> evaluation_running;
    auto start_evaluation = [&] {
        {
            std::lock_guard<std::mutex> g(learner_mutex);
            copy_weights(snapshot, learner.online);
        }
        evaluation_running = std::async(std::launch::async, [&] {
            torch::set_num_threads(1);
            return evaluate_policy(snapshot, eval_env, evaluation, graph);
        });
    };

    std::vector<PeerState> peers(world.size);
    mpi::SilenceClock silence(world.size);
    int64_t ungranted = std::max<int64_t>(0, c.steps - start_steps);
    mpi::Outgoing out;
    std::string error;  // an actor rank's failure, or the evaluation's
    // Before the job ends abnormally: a checkpoint of what the learner has (unless it failed),
    // and how to go on.
    auto save_for_resume = [&](const std::string &why) {
        std::string saved = "the last checkpoint in " + c.out_dir + " is intact";
        bool learner_ok;
        {
            std::lock_guard<std::mutex> g(error_mutex);
            learner_ok = learner_error.empty();
        }
        if (learner_ok) {
            try {
                checkpoint();
                saved = fmt::format("checkpoint at step {} written to {}", env_steps.load(), files.checkpoint);
            } catch (const std::exception &e) {
                saved += fmt::format(" (a new one could not be written: {})", e.what());
            }
        }
        return fmt::format("{}; {}: rerun the same command with --resume to continue", why, saved);
    };
    // An actor rank silent too long: stop learning, save, end the job.
    auto give_up = [&](const std::string &why) {
        stop_learner();
        mpi::abort_job(save_for_resume(why));
    };
    // SIGTERM (mpirun ending the job because another rank died, or Slurm): mpirun sends SIGKILL
    // a second later, and the main thread may be stuck in MPI after a failed read from the dead
    // rank, so a thread of its own saves and exits.
    mpi::SigtermFlag sigterm;
    std::atomic<bool> run_over{false};
    std::thread sigterm_watch([&] {
        while (!run_over) {
            if (sigterm.raised()) {
                const std::string message =
                    save_for_resume("rank 0 got SIGTERM (from mpirun when another rank died, or from Slurm)");
                fmt::print(stderr, "error: {}\n", message);
                std::fflush(stderr);
                std::_Exit(128 + SIGTERM);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    });
    struct JoinAtExit {
        std::atomic<bool> &over;
        std::thread &thread;
        ~JoinAtExit() {
            over = true;
            thread.join();
        }
    } join_sigterm_watch{run_over, sigterm_watch};
    auto receive_all = [&] {
        int from = 0, tag = 0;
        std::vector<char> bytes;
        std::vector<Transition> ts;
        std::vector<float> priorities;
        silence.poll();
        for (int n = 0; n < 1024 && mpi::try_receive(MPI_ANY_SOURCE, &from, &tag, &bytes); ++n) {
            silence.heard(from);
            if (tag == kTransitions) {
                decode_transitions(bytes, &ts, &priorities);
                for (size_t i = 0; i < ts.size(); ++i) replay.add(std::move(ts[i]), priorities[i]);
            } else if (tag == kStatus) {
                const ActorStatus s = decode_status(bytes);
                env_steps += s.env_steps;
                peers[from].env_steps += s.env_steps;
                episodes += s.episodes;
                for (size_t i = 0; i < s.episode_rewards.size(); ++i) {
                    episode_reward.push(s.episode_rewards[i]);
                    episode_speedup.push(s.episode_speedups[i]);
                }
            } else if (tag == kFailed) {
                if (error.empty()) error = fmt::format("rank {}: {}", from, decode_text(bytes));
            } else if (tag == kBye) {
                peers[from].bye = true;
            }
        }
        out.progress();
        for (int r = 1; r < world.size; ++r)
            if (!peers[r].bye && silence.silent(r) > c.mpi_timeout)
                give_up(fmt::format("rank {} has been silent for {:.0f} s (dead or hung?); aborting the job", r,
                                    silence.silent(r)));
    };

    int64_t next_checkpoint = (env_steps / c.checkpoint_every + 1) * c.checkpoint_every;
    int64_t next_eval = c.eval_every > 0 ? (env_steps / c.eval_every + 1) * c.eval_every : INT64_MAX;
    int64_t next_row = env_steps + 250, sent_version = 0;
    double last_eval = -1, last_print = -10, last_heartbeat = 0;
    auto metrics_row = [&](double eval) {
        metrics.write({seconds_before + elapsed(), env_steps.load(), episodes.load(), learner.updates, c.apex_eps,
                       episode_reward.mean(), episode_speedup.mean(), last_loss.load(), eval});
    };
    auto print_progress = [&](const char *state) {
        const int64_t steps = env_steps;
        const double rate = (steps - start_steps) / std::max(elapsed(), 1e-9);
        c.progress(fmt::format("[{}/{}] {} actor ranks x {} | {} episodes | reward {:.3f} | speedup {:.2f}x | loss "
                               "{:.4f} | {} updates | eval {} | {:.1f} steps/s | {}",
                               steps, c.steps, world.size - 1, c.actors, episodes.load(), episode_reward.mean(),
                               episode_speedup.mean(), last_loss.load(), learner.updates,
                               last_eval < 0 ? std::string("-") : fmt::format("{:.2f}x", last_eval), rate,
                               state[0]       ? std::string(state)
                               : rate > 0 ? "ETA " + format_duration((c.steps - steps) / rate)
                                              : std::string("ETA -")));
    };
    try {
        for (;;) {
            receive_all();
            {
                std::lock_guard<std::mutex> g(error_mutex);
                if (!learner_error.empty()) break;
            }
            if (!error.empty() || env_steps >= c.steps || (c.max_seconds > 0 && elapsed() >= c.max_seconds)) break;
            {
                std::vector<char> bytes;
                {
                    std::lock_guard<std::mutex> g(published.mutex);
                    if (published.version != sent_version) {
                        sent_version = published.version;
                        bytes = encode_weights(sent_version, published.weights);
                    }
                }
                if (!bytes.empty())
                    for (int r = 1; r < world.size; ++r)
                        if (out.pending(r, kWeights) == 0) out.send(r, kWeights, bytes);
            }
            const bool heartbeat = now() - last_heartbeat >= kHeartbeatSeconds;
            for (int r = 1; r < world.size; ++r) {
                const int64_t window = kGrantPerActor * c.actors, ahead = peers[r].granted - peers[r].env_steps;
                const int64_t more = ahead < window / 2 ? std::min(window - ahead, ungranted) : 0;
                peers[r].granted += more;
                ungranted -= more;
                if (more > 0 || heartbeat) out.send(r, kGrant, encode_grant(peers[r].granted));
            }
            if (heartbeat) last_heartbeat = now();
            const int64_t steps = env_steps;
            if (steps >= next_checkpoint) {
                checkpoint();
                next_checkpoint = (steps / c.checkpoint_every + 1) * c.checkpoint_every;
            }
            bool evaluated = false;
            if (evaluation_running.valid() &&
                evaluation_running.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
                last_eval = evaluation_running.get();
                evaluated = true;
            } else if (steps >= next_eval && !evaluation_running.valid()) {
                start_evaluation();
                next_eval = (steps / c.eval_every + 1) * c.eval_every;
            }
            if (steps >= next_row || evaluated) {
                metrics_row(evaluated ? last_eval : -1);
                next_row = steps + 250;
            }
            if (c.progress && elapsed() - last_print >= 2) {
                last_print = elapsed();
                print_progress("");
            }
            std::this_thread::sleep_for(kPoll);
        }
    } catch (const std::exception &e) {
        if (error.empty()) error = std::string("rank 0: ") + e.what();
    }

    // Stop every actor rank, then the learner (its state is what gets saved), and wait for each
    // rank's Bye so no message is left in flight.
    for (int r = 1; r < world.size; ++r) out.send(r, kStop, encode_text(""));
    stop_learner();
    for (;;) {
        receive_all();
        bool all = true;
        for (int r = 1; r < world.size; ++r) all = all && peers[r].bye;
        if (all) break;
        std::this_thread::sleep_for(kPoll);
    }
    out.drain(c.mpi_timeout);
    if (evaluation_running.valid()) {
        try {
            last_eval = evaluation_running.get();
        } catch (const std::exception &e) {
            if (error.empty()) error = std::string("evaluation: ") + e.what();
        }
    }
    if (!learner_error.empty()) {
        error = learner_error + (error.empty() ? "" : "; " + error);
    } else {
        checkpoint();
        if (error.empty()) {
            last_eval = evaluate_policy(learner.online, eval_env, evaluation, graph);
            metrics_row(last_eval);
        }
    }
    if (c.progress) print_progress(error.empty() ? "done" : "stopped");
    if (!error.empty())
        throw looptool::Error(error +
                              (learner_error.empty() ? "; checkpoint written to " + files.checkpoint
                                                     : "; the last checkpoint in " + c.out_dir + " is intact") +
                              ": rerun with --resume to continue");
    TrainSummary summary;
    summary.resumed = resumed;
    summary.env_steps = env_steps;
    summary.episodes = episodes;
    summary.updates = learner.updates;
    summary.seconds = seconds_before + elapsed();
    summary.eval_speedup = last_eval;
    summary.policy_path = files.policy;
    summary.metrics_path = files.metrics;
    return summary;
}

/// The shared part of the set-up: what every rank needs to act.
struct Common {
    Dataset dataset;
    std::unique_ptr<Environment> env;  // rank 0: the evaluation environment
    QNetConfig net_config;
};

Common common_setup(const TrainConfig &c) {
    Common s;
    s.dataset = Dataset::load(c.dataset_dir, c.split_seed);
    if (s.dataset.train.empty()) throw looptool::Error("the train split of " + c.dataset_dir + " is empty");
    s.env = std::make_unique<Environment>(train_env_config(c));
    s.net_config = net_config_for(c, *s.env);
    return s;
}

// ---------------------------------------------------------------------------------------------
// The end of a run with --store: each node's store into the run directory.

/// "%h" in a --store path is the rank's host name: per-node files on a shared file system.
std::string store_for_host(const std::string &path, const std::string &host) {
    std::string out = path;
    for (size_t at = out.find("%h"); at != std::string::npos; at = out.find("%h", at + host.size()))
        out.replace(at, 2, host);
    return out;
}

/// With a node-local --store, measurements are spread over one store per host. Once every rank
/// has stopped measuring, the first rank of each host other than rank 0's sends a snapshot of
/// its store, and rank 0 merges its own store and those into RUN_DIR/store.sqlite (what
/// `looptool store merge` does), so the run directory keeps them all. Failures here cost only
/// measurements, never the trained policy: they are reported with the command that finishes the
/// merge by hand.
void merge_node_stores(const mpi::Session &world, const TrainConfig &c, const std::vector<std::string> &hosts) {
    if (c.store_path.empty()) return;  // every rank wrote RUN_DIR/store.sqlite already
    const std::string dest_path = c.out_dir + "/store.sqlite";
    if (!mpi::barrier(c.mpi_timeout)) {
        if (world.rank == 0)
            fmt::print(stderr, "warning: some rank did not finish within {:.0f} s; node stores not merged into {} "
                               "(use `looptool store merge --store {} <node stores>`)\n",
                       c.mpi_timeout, dest_path, dest_path);
        return;
    }
    std::vector<int> senders;  // the first rank of every other host
    for (int r = 1; r < world.size; ++r)
        if (hosts[size_t(r)] != hosts[0] &&
            std::find(hosts.begin(), hosts.end(), hosts[size_t(r)]) - hosts.begin() == r)
            senders.push_back(r);

    if (world.rank != 0) {
        if (std::find(senders.begin(), senders.end(), world.rank) == senders.end()) return;
        std::vector<char> bytes;
        int tag = kStore;
        const std::string snapshot = fmt::format("{}.snapshot.{}", c.store_path, world.rank);
        try {
            std::filesystem::remove(snapshot);
            MeasurementStore::open(c.store_path, /*create=*/false)->snapshot_to(snapshot);
            std::ifstream in(snapshot, std::ios::binary);
            bytes.assign(std::istreambuf_iterator<char>(in), {});
            if (!in.good() && !in.eof()) throw looptool::Error("cannot read " + snapshot);
            if (bytes.size() > size_t(INT32_MAX)) throw looptool::Error("the store is over 2 GB");
        } catch (const std::exception &e) {
            tag = kStoreFailed;
            const std::string why = fmt::format("{}: {}", c.store_path, e.what());
            bytes.assign(why.begin(), why.end());
        }
        std::error_code ec;
        std::filesystem::remove(snapshot, ec);
        mpi::Outgoing out;
        out.send(0, tag, std::move(bytes));
        if (!out.drain(c.mpi_timeout))
            fmt::print(stderr, "warning: rank {}: rank 0 did not take this host's store within {:.0f} s\n",
                       world.rank, c.mpi_timeout);
        return;
    }

    try {
        auto dest = MeasurementStore::open(dest_path);
        std::error_code ec;
        int64_t added = 0;
        if (!std::filesystem::equivalent(c.store_path, dest_path, ec)) added += dest->merge_from(c.store_path);
        for (int r : senders) {
            std::vector<char> bytes;
            int from = 0, tag = 0;
            const double deadline = now() + c.mpi_timeout;
            // Only the store message is left to come from a sender: Bye was its last one before.
            while (!mpi::try_receive(r, &from, &tag, &bytes) || (tag != kStore && tag != kStoreFailed)) {
                if (now() > deadline) {
                    tag = 0;
                    break;
                }
                std::this_thread::sleep_for(kPoll);
            }
            const std::string &host = hosts[size_t(r)];
            if (tag != kStore) {
                fmt::print(stderr, "warning: the store of host {} (rank {}) was not merged: {}\n", host, r,
                           tag == kStoreFailed ? std::string(bytes.begin(), bytes.end()) : "nothing came");
                continue;
            }
            const std::string part = fmt::format("{}/store.{}.part", c.out_dir, r);
            looptool::write_file_atomically(part, std::string_view(bytes.data(), bytes.size()));
            try {
                added += dest->merge_from(part);
            } catch (...) {
                std::filesystem::remove(part, ec);
                throw;
            }
            std::filesystem::remove(part, ec);
        }
        if (c.progress)
            c.progress(fmt::format("stores of {} hosts merged into {}: {} new measurements", senders.size() + 1,
                                   dest_path, added));
    } catch (const std::exception &e) {
        fmt::print(stderr, "warning: merging the node stores into {} failed: {}\n", dest_path, e.what());
    }
}

}  // namespace

TrainSummary train_apex_mpi(const TrainConfig &config) {
    if (config.actors < 1) throw looptool::Error("--actors must be at least 1");
    if (config.mpi_timeout <= 0) throw looptool::Error("--mpi-timeout must be positive");
    mpi::Session world;
    const std::vector<std::string> hosts = mpi::host_names();
    TrainConfig c = config;
    c.store_path = store_for_host(config.store_path, hosts[size_t(world.rank)]);
    if (world.size < 2)
        throw looptool::Error("--distributed mpi needs at least 2 MPI processes (mpirun -np 2 or more, or srun): "
                              "rank 0 learns, every other rank acts");
    auto fail_together = [&](const std::string &mine) {
        const std::string error = mpi::first_error(world, mine);
        if (error.empty()) return false;
        if (world.rank == 0) throw looptool::Error(error);
        return true;  // other ranks leave quietly: rank 0 reports, and its exit status fails the job
    };
    TrainSummary quiet;
    quiet.primary = false;

    // 1. Rank 0 claims the run directory (which holds the default store).
    RunFiles files;
    std::string error;
    try {
        if (c.store_path.empty() && std::any_of(hosts.begin(), hosts.end(), [&](auto &h) { return h != hosts[0]; }))
            throw looptool::Error("--distributed mpi over several hosts needs --store with a node-local path (the "
                                  "same on every node, e.g. /tmp/looptune_store.sqlite): SQLite's WAL store cannot "
                                  "be shared across hosts");
        if (world.rank == 0) files = prepare_run_dir(c);
    } catch (const std::exception &e) {
        error = e.what();
    }
    if (fail_together(error)) return quiet;

    // 2. The first rank on each host opens (and may create) the store before the others: several
    // processes creating one SQLite file at once can fail with "database is locked".
    std::optional<Common> common;
    const bool first_on_host = std::find(hosts.begin(), hosts.end(), hosts[world.rank]) - hosts.begin() == world.rank;
    try {
        if (first_on_host) common = common_setup(c);
    } catch (const std::exception &e) {
        error = e.what();
    }
    if (fail_together(error)) return quiet;

    // 3. Every rank: dataset, environment, network shape; rank 0 also the learner and replay,
    // the checkpoint when resuming, and the warm start.
    std::unique_ptr<Learner> learner;
    std::unique_ptr<PrioritizedReplay> replay;
    std::unique_ptr<MetricsLog> metrics;
    std::vector<Demo> demos;
    nlohmann::json counters = {{"env_steps", 0}, {"episodes", 0}, {"seconds", 0.0}};
    bool resumed = false;
    std::vector<float> weights;
    try {
        if (!common) common = common_setup(c);
        if (world.rank == 0) {
            learner = std::make_unique<Learner>(c, common->net_config);
            replay = std::make_unique<PrioritizedReplay>(c.replay_capacity, c.per_alpha, c.seed);
            resumed = c.resume && learner->load_checkpoint(files.checkpoint, &counters);
            if (resumed && c.progress)
                c.progress(fmt::format("resumed from {} at step {} ({} episodes, {} updates)", files.checkpoint,
                                       counters["env_steps"].get<int64_t>(), counters["episodes"].get<int64_t>(),
                                       learner->updates));
            metrics = std::make_unique<MetricsLog>(files.metrics, resumed);
            if (!c.warmstart.empty()) {
                demos = load_demonstrations(c, *common->env, *replay, c.encoder == "gnn");
                if (!resumed) pretrain_on_demonstrations(c, *learner, *replay, demos);
            }
            weights = flat_weights(learner->online);
        } else {
            weights = flat_weights(QNet(common->net_config));  // the size, to check rank 0's against
        }
    } catch (const std::exception &e) {
        error = e.what();
    }
    if (fail_together(error)) return quiet;

    // 4. Rank 0's starting point (step count and weights) to everyone.
    int64_t start[2] = {counters["env_steps"].get<int64_t>(), static_cast<int64_t>(weights.size())};
    mpi::bcast(start, 2, MPI_INT64_T, 0);
    if (start[1] != static_cast<int64_t>(weights.size()))
        error = fmt::format("its network has {} weights, rank 0's {} (different builds or settings?)",
                            weights.size(), start[1]);
    if (fail_together(error)) return quiet;
    mpi::bcast(weights.data(), static_cast<int>(weights.size()), MPI_FLOAT, 0);
    if (world.rank == 0 && c.progress)
        c.progress(fmt::format("MPI: rank 0 learns, {} ranks x {} actors act (eps {:.3g} .. {:.3g})", world.size - 1,
                               c.actors, global_epsilon(c, 0, (world.size - 1) * c.actors),
                               global_epsilon(c, (world.size - 1) * c.actors - 1, (world.size - 1) * c.actors)));

    if (world.rank != 0) {
        TrainSummary summary = actor_rank(world, c, common->dataset, common->net_config, weights, start[0]);
        merge_node_stores(world, c, hosts);
        return summary;
    }
    const std::vector<std::string> evaluation = eval_files(c, common->dataset);
    RankZero zero{world,    c,       files,    evaluation, *common->env, common->net_config,
                  *learner, *replay,  *metrics, demos,      counters,     resumed};
    TrainSummary summary = zero.run();
    merge_node_stores(world, c, hosts);
    return summary;
}

}  // namespace looptune
