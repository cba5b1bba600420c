// Ape-X (Horgan et al. 2018), readable top to bottom: N actor threads, each with its own
// environment and JIT and its own exploration rate eps_i = eps^(1 + alpha * i / (N - 1)), feed
// one prioritized replay (initial priorities computed by the actor's copy of the network); a
// learner thread trains on it and publishes weights every `weight_sync` updates; the main
// thread checkpoints, evaluates and reports. All actors share the measurement store.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "agents/learner.h"
#include "looptool/error.h"

namespace looptune {

namespace {

/// The learner's latest weights, for actors to copy.
struct Published {
    std::mutex mutex;
    QNet net{nullptr};
    int64_t version = 0;
};

struct Shared {
    std::atomic<int64_t> env_steps{0}, episodes{0};
    std::atomic<bool> stop{false};
    std::mutex stats_mutex;
    RunningMean episode_reward, episode_speedup;
    std::mutex error_mutex;
    std::string error;  // first exception of any thread
    void fail(const std::string &what) {
        std::lock_guard<std::mutex> g(error_mutex);
        if (error.empty()) error = what;
        stop = true;
    }
};

double actor_epsilon(const TrainConfig &c, int i) {
    if (c.actors <= 1) return c.apex_eps;
    return std::pow(c.apex_eps, 1 + c.apex_alpha * i / double(c.actors - 1));
}

void run_actor(int id, const TrainConfig &c, const Dataset &dataset, const QNetConfig &net_config,
               PrioritizedReplay &replay, Published &published, Shared &shared) {
    Environment env(train_env_config(c));
    const bool graph = c.encoder == "gnn";
    QNet net(net_config);
    int64_t version = -1;
    const double eps = actor_epsilon(c, id);
    std::mt19937_64 rng(c.seed * 1000003 + id * 7919 + shared.env_steps.load());
    std::uniform_int_distribution<size_t> pick(0, dataset.train.size() - 1);
    std::vector<Transition> outbox;
    auto flush = [&] {
        if (outbox.empty()) return;
        std::vector<float> p = Learner::td_errors(net, outbox);
        for (size_t i = 0; i < outbox.size(); ++i) replay.add(std::move(outbox[i]), p[i]);
        outbox.clear();
    };
    while (!shared.stop) {
        env.reset(dataset.train[pick(rng)]);
        NStepBuilder nstep(c.n_step, c.gamma);
        double ep_reward = 0, base = env.gflops(), best = base;
        for (bool done = false; !done && !shared.stop;) {
            {
                std::lock_guard<std::mutex> g(published.mutex);
                if (published.version != version) {
                    copy_weights(net, published.net);
                    version = published.version;
                }
            }
            const ActedStep step = act_epsilon_greedy(net, env, graph, eps, rng, nstep, &outbox);
            if (!step.acted) break;
            done = step.done;
            ep_reward += step.reward;
            best = std::max(best, env.gflops());
            if (outbox.size() >= 16) flush();
            if (++shared.env_steps >= c.steps) shared.stop = true;
        }
        flush();
        ++shared.episodes;
        std::lock_guard<std::mutex> g(shared.stats_mutex);
        shared.episode_reward.push(ep_reward);
        shared.episode_speedup.push(best / std::max(base, 1e-9));
    }
}

}  // namespace

TrainSummary train_apex(const TrainConfig &c) {
    if (c.actors < 1) throw looptool::Error("--actors must be at least 1");
    const RunFiles files = prepare_run_dir(c);
    const Dataset dataset = Dataset::load(c.dataset_dir, c.split_seed);
    if (dataset.train.empty()) throw looptool::Error("the train split of " + c.dataset_dir + " is empty");
    const std::vector<std::string> evaluation = eval_files(c, dataset);
    Environment eval_env(train_env_config(c));
    const QNetConfig net_config = net_config_for(c, eval_env);
    const bool graph = c.encoder == "gnn";
    Learner learner(c, net_config);
    PrioritizedReplay replay(c.replay_capacity, c.per_alpha, c.seed);

    nlohmann::json counters = {{"env_steps", 0}, {"episodes", 0}, {"seconds", 0.0}};
    TrainSummary summary;
    summary.resumed = c.resume && learner.load_checkpoint(files.checkpoint, &counters);
    Shared shared;
    shared.env_steps = counters["env_steps"].get<int64_t>();
    shared.episodes = counters["episodes"].get<int64_t>();
    const double seconds_before = counters["seconds"];
    if (summary.resumed && c.progress)
        c.progress(fmt::format("resumed from {} at step {} ({} episodes, {} updates)", files.checkpoint,
                               shared.env_steps.load(), shared.episodes.load(), learner.updates));
    MetricsLog metrics(files.metrics, summary.resumed);
    std::vector<Demo> demos;
    if (!c.warmstart.empty()) {
        demos = load_demonstrations(c, eval_env, replay, graph);
        if (!summary.resumed) pretrain_on_demonstrations(c, learner, replay, demos);
    }

    Published published;
    published.net = QNet(net_config);
    copy_weights(published.net, learner.online);
    auto publish = [&] {
        std::lock_guard<std::mutex> g(published.mutex);
        copy_weights(published.net, learner.online);
        ++published.version;
    };
    // The evaluator's and checkpointer's view of the learner, taken between updates.
    std::mutex learner_mutex;

    const int64_t start_steps = shared.env_steps, updates_at_start = learner.updates;
    if (shared.env_steps >= c.steps) shared.stop = true;  // a finished run resumed: nothing to do
    std::atomic<double> last_loss{0};
    std::thread learner_thread([&] {
        try {
            RunningMean loss_mean(200);
            while (!shared.stop) {
                const int64_t steps = shared.env_steps;
                const bool ready = replay.size() >= std::min<int64_t>(c.learning_starts, c.replay_capacity);
                if (!ready || learner.updates >= updates_at_start + c.updates_per_step * (steps - start_steps)) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(2));
                    continue;
                }
                loss_mean.push(learner.replay_step(replay, steps, &demos, &learner_mutex));
                last_loss = loss_mean.mean();
                if (learner.updates % c.weight_sync == 0) publish();
            }
        } catch (const std::exception &e) {
            shared.fail(std::string("learner: ") + e.what());
        }
    });
    std::vector<std::thread> actors;
    for (int i = 0; i < c.actors; ++i)
        actors.emplace_back([&, i] {
            try {
                run_actor(i, c, dataset, net_config, replay, published, shared);
            } catch (const std::exception &e) {
                shared.fail(fmt::format("actor {}: {}", i, e.what()));
            }
        });

    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    QNet snapshot(net_config);
    auto take_snapshot = [&] {
        std::lock_guard<std::mutex> g(learner_mutex);
        copy_weights(snapshot, learner.online);
    };
    auto checkpoint = [&] {
        std::lock_guard<std::mutex> g(learner_mutex);
        counters = {{"env_steps", shared.env_steps.load()}, {"episodes", shared.episodes.load()},
                    {"seconds", seconds_before + elapsed()}};
        learner.save_checkpoint(files.checkpoint, counters);
        learner.save_policy(files.policy, {{"trainer", "apex"}, {"actors", c.actors}, {"seed", c.seed},
                                           {"env_steps", shared.env_steps.load()}, {"dataset", c.dataset_dir},
                                           {"warmstart", c.warmstart}});
    };
    int64_t next_checkpoint = (shared.env_steps / c.checkpoint_every + 1) * c.checkpoint_every;
    int64_t next_eval = c.eval_every > 0 ? (shared.env_steps / c.eval_every + 1) * c.eval_every : INT64_MAX;
    int64_t next_row = shared.env_steps + 250;
    double last_eval = -1, last_print = -10;
    // Threads must be joined whatever happens in this loop (an evaluation that throws, say).
    auto join_all = [&] {
        shared.stop = true;
        for (auto &t : actors)
            if (t.joinable()) t.join();
        if (learner_thread.joinable()) learner_thread.join();
    };
    try {
    for (;;) {
        const bool out_of_time = c.max_seconds > 0 && elapsed() >= c.max_seconds;
        if (out_of_time) shared.stop = true;
        const bool last = shared.stop.load();
        const int64_t steps = shared.env_steps;
        if (steps >= next_checkpoint || last) {
            if (last) {
                join_all();
                if (!shared.error.empty()) break;  // keep the last good checkpoint
            }
            checkpoint();
            next_checkpoint += c.checkpoint_every;
        }
        const bool evaluate = steps >= next_eval || last;
        if (evaluate) {
            take_snapshot();
            last_eval = evaluate_policy(snapshot, eval_env, evaluation, graph);
            next_eval += c.eval_every;
        }
        double reward, speedup;
        {
            std::lock_guard<std::mutex> g(shared.stats_mutex);
            reward = shared.episode_reward.mean();
            speedup = shared.episode_speedup.mean();
        }
        if (steps >= next_row || evaluate) {
            metrics.write({seconds_before + elapsed(), steps, shared.episodes.load(), learner.updates,
                           actor_epsilon(c, 0), reward, speedup, last_loss.load(), evaluate ? last_eval : -1});
            next_row = steps + 250;
        }
        if (c.progress && (elapsed() - last_print >= 2 || last)) {
            last_print = elapsed();
            const double rate = (steps - start_steps) / std::max(elapsed(), 1e-9);
            c.progress(fmt::format("[{}/{}] {} actors | {} episodes | reward {:.3f} | speedup {:.2f}x | loss {:.4f}"
                                   " | {} updates | eval {} | {:.1f} steps/s | ETA {}",
                                   steps, c.steps, c.actors, shared.episodes.load(), reward, speedup,
                                   last_loss.load(), learner.updates,
                                   last_eval < 0 ? std::string("-") : fmt::format("{:.2f}x", last_eval), rate,
                                   steps > start_steps && elapsed() > 5 ? format_duration((c.steps - steps) / rate) : std::string("?")));
        }
        if (last) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    } catch (...) {
        join_all();
        throw;
    }
    if (!shared.error.empty())
        throw looptool::Error(shared.error + " (the last checkpoint in " + c.out_dir +
                              " is intact: rerun with --resume to continue)");
    summary.env_steps = shared.env_steps;
    summary.episodes = shared.episodes;
    summary.updates = learner.updates;
    summary.seconds = seconds_before + elapsed();
    summary.eval_speedup = last_eval;
    summary.policy_path = files.policy;
    summary.metrics_path = files.metrics;
    return summary;
}

}  // namespace looptune
