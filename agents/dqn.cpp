// DQN, readable top to bottom: one thread acts ε-greedily under the action mask, stores n-step
// transitions in a prioritized replay, and learns with double-Q targets, a dueling network and
// a target network. Ape-X (agents/apex.cpp) distributes the same learner over actor threads.
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "agents/learner.h"
#include "looptool/error.h"

namespace looptune {

TrainSummary train_apex(const TrainConfig &config);  // agents/apex.cpp
#ifdef LOOPTUNE_WITH_MPI
TrainSummary train_apex_mpi(const TrainConfig &config);  // agents/apex_mpi.cpp
#endif

static TrainSummary train_dqn(const TrainConfig &c) {
    const RunFiles files = prepare_run_dir(c);
    const Dataset dataset = Dataset::load(c.dataset_dir, c.split_seed);
    if (dataset.train.empty()) throw looptool::Error("the train split of " + c.dataset_dir + " is empty");
    const std::vector<std::string> evaluation = eval_files(c, dataset);
    Environment env(train_env_config(c)), eval_env(train_env_config(c));
    const QNetConfig net_config = net_config_for(c, env);
    const bool graph = c.encoder == "gnn";
    Learner learner(c, net_config);
    PrioritizedReplay replay(c.replay_capacity, c.per_alpha, c.seed);

    // Counters survive a resume through the checkpoint.
    nlohmann::json counters = {{"env_steps", 0}, {"episodes", 0}, {"seconds", 0.0}};
    TrainSummary summary;
    summary.resumed = c.resume && learner.load_checkpoint(files.checkpoint, &counters);
    int64_t env_steps = counters["env_steps"], episodes = counters["episodes"];
    const double seconds_before = counters["seconds"];
    if (summary.resumed && c.progress)
        c.progress(fmt::format("resumed from {} at step {} ({} episodes, {} updates)", files.checkpoint, env_steps,
                               episodes, learner.updates));
    MetricsLog metrics(files.metrics, summary.resumed);

    std::vector<Demo> demos;
    if (!c.warmstart.empty()) {
        demos = load_demonstrations(c, env, replay, graph);
        if (!summary.resumed) pretrain_on_demonstrations(c, learner, replay, demos);
    }

    std::mt19937_64 rng(c.seed * 1000003 + env_steps);
    std::uniform_int_distribution<size_t> pick_bench(0, dataset.train.size() - 1);
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    auto checkpoint = [&] {
        counters = {{"env_steps", env_steps}, {"episodes", episodes}, {"seconds", seconds_before + elapsed()}};
        learner.save_checkpoint(files.checkpoint, counters);
        learner.save_policy(files.policy, {{"trainer", "dqn"}, {"env_steps", env_steps}, {"seed", c.seed},
                                           {"dataset", c.dataset_dir}, {"warmstart", c.warmstart}});
    };

    RunningMean episode_reward, episode_speedup, loss_mean(200);
    NStepBuilder nstep(c.n_step, c.gamma);
    std::vector<Transition> completed;
    double ep_reward = 0, ep_base = 0, ep_best = 0, epsilon = c.eps_start, last_eval = -1, last_print = -10;
    bool in_episode = false;
    const int64_t start_steps = env_steps, updates_at_start = learner.updates;
    while (env_steps < c.steps && !(c.max_seconds > 0 && elapsed() >= c.max_seconds)) {
        if (!in_episode) {
            env.reset(dataset.train[pick_bench(rng)]);
            ep_reward = 0;
            ep_base = ep_best = env.gflops();
            in_episode = true;
        }
        // Act.
        epsilon = c.eps_end + (c.eps_start - c.eps_end) *
                                  std::max(0.0, 1.0 - static_cast<double>(env_steps) / c.eps_decay_steps);
        completed.clear();
        const ActedStep step = act_epsilon_greedy(learner.online, env, graph, epsilon, rng, nstep, &completed);
        if (!step.acted) {  // nothing legal: end the episode early
            in_episode = false;
            continue;
        }
        ++env_steps;
        ep_reward += step.reward;
        ep_best = std::max(ep_best, env.gflops());
        for (Transition &t : completed) replay.add(std::move(t));
        if (step.done) {
            ++episodes;
            episode_reward.push(ep_reward);
            episode_speedup.push(ep_best / std::max(ep_base, 1e-9));
            in_episode = false;
        }

        // Learn, at a fixed replay ratio.
        if (replay.size() >= std::min<int64_t>(c.learning_starts, c.replay_capacity)) {
            while (learner.updates < updates_at_start + c.updates_per_step * (env_steps - start_steps))
                loss_mean.push(learner.replay_step(replay, env_steps, &demos));
        }

        // Bookkeeping: checkpoints, evaluation, metrics, progress.
        const bool last = env_steps >= c.steps || (c.max_seconds > 0 && elapsed() >= c.max_seconds);
        if (env_steps % c.checkpoint_every == 0 || last) checkpoint();
        const bool evaluate = (c.eval_every > 0 && env_steps % c.eval_every == 0) || last;
        if (evaluate) last_eval = evaluate_policy(learner.online, eval_env, evaluation, graph);
        if (evaluate || env_steps % 250 == 0)
            metrics.write({seconds_before + elapsed(), env_steps, episodes, learner.updates, epsilon,
                           episode_reward.mean(), episode_speedup.mean(), loss_mean.mean(),
                           evaluate ? last_eval : -1});
        if (c.progress && (elapsed() - last_print >= 2 || last)) {
            last_print = elapsed();
            const double rate = (env_steps - start_steps) / std::max(elapsed(), 1e-9);
            c.progress(fmt::format("[{}/{}] {} episodes | eps {:.2f} | reward {:.3f} | speedup {:.2f}x | loss {:.4f}"
                                   " | eval {} | {:.1f} steps/s | ETA {}",
                                   env_steps, c.steps, episodes, epsilon, episode_reward.mean(),
                                   episode_speedup.mean(), loss_mean.mean(),
                                   last_eval < 0 ? std::string("-") : fmt::format("{:.2f}x", last_eval), rate,
                                   env_steps > start_steps && elapsed() > 5 ? format_duration((c.steps - env_steps) / rate) : std::string("?")));
        }
    }
    summary.env_steps = env_steps;
    summary.episodes = episodes;
    summary.updates = learner.updates;
    summary.seconds = seconds_before + elapsed();
    summary.eval_speedup = last_eval;
    summary.policy_path = files.policy;
    summary.metrics_path = files.metrics;
    return summary;
}

TrainSummary train(const TrainConfig &config) {
    if (config.steps <= 0) throw looptool::Error("--steps must be positive");
    if (config.batch <= 0 || config.n_step <= 0 || config.checkpoint_every <= 0 || config.target_update <= 0)
        throw looptool::Error("--batch, --n-step, --checkpoint-every and --target-update must be positive");
    if (config.gamma <= 0 || config.gamma > 1) throw looptool::Error("--gamma must be in (0, 1]");
    torch::set_num_threads(1);  // one core per actor or learner: the machine is shared
    if (config.distributed == "mpi") {
        if (config.trainer != "apex") throw looptool::Error("--distributed mpi needs --trainer apex");
#ifdef LOOPTUNE_WITH_MPI
        return train_apex_mpi(config);
#else
        throw looptool::Error("--distributed mpi: this looptool was built without MPI (install libopenmpi-dev, "
                              "then reconfigure with CMake; LOOPTUNE_WITH_MPI)");
#endif
    }
    if (!config.distributed.empty())
        throw looptool::Error("unknown --distributed '" + config.distributed + "' (mpi, or none for threads)");
    if (config.trainer == "dqn") return train_dqn(config);
    if (config.trainer == "apex") return train_apex(config);
    throw looptool::Error("unknown trainer '" + config.trainer + "' (dqn or apex)");
}

}  // namespace looptune
