// DQN, readable top to bottom: one thread acts ε-greedily under the action mask, stores n-step
// transitions in a prioritized replay, and learns with double-Q targets, a dueling network and
// a target network. Ape-X (rl/apex.cpp) distributes the same learner over actor threads.
// The run's bookkeeping (directory, resume, checkpoints, metrics, progress) is TrainingRun's.
#include <fmt/format.h>

#include <cmath>

#include "looptool/ir/error.h"
#include "rl/demonstrations.h"
#include "rl/episode_starts.h"
#include "rl/learner.h"
#include "rl/torch_errors.h"
#include "rl/training_run.h"

namespace looptune {

TrainSummary train_apex(const TrainConfig &config);  // rl/apex.cpp
#ifdef LOOPTUNE_WITH_MPI
TrainSummary train_apex_mpi(const TrainConfig &config);  // rl/mpi/apex_mpi.cpp
#endif

static TrainSummary train_dqn(const TrainConfig &c) {
    TrainingRun run(c);
    run.create_dir();
    const Dataset &dataset = run.dataset();
    Environment env(train_env_config(c)), eval_env(train_env_config(c));
    const QNetConfig net_config = net_config_for(c, env);
    const bool graph = c.graph();
    Learner learner(c, net_config);
    PrioritizedReplay replay(c.replay_capacity, c.per_alpha, c.seed);
    TrainProfile profile;
    if (c.profile) learner.profile = &profile;
    run.start(learner);

    std::vector<Demo> demos;
    if (!c.warmstart.empty()) {
        demos = load_demonstrations(c, env, replay, graph);
        if (!run.resumed()) pretrain_on_demonstrations(c, learner, replay, demos);
    }

    run.loop_started(learner.updates);
    RunSnapshot at;
    at.env_steps = run.start_steps();
    at.episodes = run.start_episodes();
    std::mt19937_64 rng(c.seed * 1000003 + at.env_steps);
    EpisodeStarts starts(c, dataset);
    RunningMean episode_reward, episode_speedup, loss_mean(200);
    NStepBuilder nstep(c.n_step, c.gamma);
    std::vector<Transition> completed;
    double ep_reward = 0, ep_base = 0, ep_best = 0;
    bool in_episode = false;
    RlState current;  // env's state, encoded (empty after a reset)
    profile.set_env_baseline(env.counters());
    const double profile_start = run.elapsed();
    while (at.env_steps < c.steps && !run.out_of_time()) {
        if (!in_episode) {
            starts.reset(env, rng);
            current.flat.clear();
            ep_reward = 0;
            ep_base = ep_best = env.gflops();
            in_episode = true;
        }
        // Act.
        at.epsilon = c.eps_end +
                     (c.eps_start - c.eps_end) *
                         std::max(0.0, 1.0 - static_cast<double>(at.env_steps) / c.eps_decay_steps);
        completed.clear();
        const ActedStep step = act_epsilon_greedy(learner.online, env, graph, at.epsilon, rng,
                                                  nstep, &completed, current, learner.profile);
        if (!step.acted) {  // nothing legal: end the episode early
            in_episode = false;
            continue;
        }
        ++at.env_steps;
        ep_reward += step.reward;
        ep_best = std::max(ep_best, env.gflops());
        for (Transition &t : completed) replay.add(std::move(t));
        if (step.done) {
            ++at.episodes;
            episode_reward.push(ep_reward);
            episode_speedup.push(ep_best / std::max(ep_base, 1e-9));
            in_episode = false;
        }

        // Learn, at a fixed replay ratio.
        if (replay.size() >= std::min<int64_t>(c.learning_starts, c.replay_capacity)) {
            while (learner.updates <
                   run.start_updates() + c.updates_per_step * (at.env_steps - run.start_steps()))
                loss_mean.push(learner.replay_step(replay, at.env_steps, &demos));
        }
        at.updates = learner.updates;
        at.episode_reward = episode_reward.mean();
        at.episode_speedup = episode_speedup.mean();
        at.loss = loss_mean.mean();

        // Bookkeeping: checkpoints, evaluation, metrics, progress.
        const bool last = at.env_steps >= c.steps || run.out_of_time();
        if (at.env_steps % c.checkpoint_every == 0 || last) run.checkpoint(learner, at, {});
        const bool evaluate = (c.eval_every > 0 && at.env_steps % c.eval_every == 0) || last;
        if (evaluate) at.eval = run.evaluate(learner.online, eval_env);
        if (evaluate || at.env_steps % 250 == 0) run.record(at, evaluate);
        run.report(at, fmt::format("eps {:.2f}", at.epsilon), last);
    }
    at.updates = learner.updates;
    TrainSummary summary = run.summary(at);
    if (c.profile) summary.profile = profile.report(env.counters(), run.elapsed() - profile_start);
    return summary;
}

static TrainSummary train_checked(const TrainConfig &config);

TrainSummary train(const TrainConfig &config) {
    return one_line_torch_errors([&] { return train_checked(config); });
}

static TrainSummary train_checked(const TrainConfig &config) {
    torch::set_num_threads(1);  // one core per actor or learner: the machine is shared
    switch (config.distributed) {
        case Distributed::Threads: break;
        case Distributed::Mpi:
            if (config.trainer != Trainer::Apex)
                throw looptool::Error("--distributed mpi needs --trainer apex");
#ifdef LOOPTUNE_WITH_MPI
            return train_apex_mpi(config);
#else
            throw looptool::Error(
                "--distributed mpi: this looptool was built without MPI (install libopenmpi-dev, "
                "then reconfigure with CMake; LOOPTUNE_WITH_MPI)");
#endif
    }
    if (config.profile && config.trainer != Trainer::Dqn)
        throw looptool::Error("--profile: only --trainer dqn is profiled");
    switch (config.trainer) {
        case Trainer::Dqn: return train_dqn(config);
        case Trainer::Apex: return train_apex(config);
    }
    ::looptool::internal_check_failed("a valid enum value", __FILE__, __LINE__, "bad Trainer");
}

}  // namespace looptune
