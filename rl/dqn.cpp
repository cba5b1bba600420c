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

namespace {

/// DQN's actor: the episode in progress, its exploration and the returns of the last episodes.
struct DqnActor {
    DqnActor(const TrainConfig &c, const Dataset &dataset, int64_t start_steps)
        : rng(c.seed * 1000003 + start_steps), starts(c, dataset), nstep(c.n_step, c.gamma) {}

    std::mt19937_64 rng;
    EpisodeStarts starts;
    RunningMean episode_reward, episode_speedup;
    NStepBuilder nstep;
    std::vector<Transition> completed;
    double ep_reward = 0, ep_base = 0, ep_best = 0;
    bool in_episode = false;
    RlState current;  // env's state, encoded (empty after a reset)
};

/// ε, decayed linearly from eps_start to eps_end over eps_decay_steps.
double dqn_epsilon(const TrainConfig &c, int64_t env_steps) {
    return c.eps_end + (c.eps_start - c.eps_end) *
                           std::max(0.0, 1.0 - static_cast<double>(env_steps) / c.eps_decay_steps);
}

void start_episode(DqnActor &actor, Environment &env) {
    actor.starts.reset(env, actor.rng);
    actor.current.flat.clear();
    actor.ep_reward = 0;
    actor.ep_base = actor.ep_best = env.gflops();
    actor.in_episode = true;
}

/// One ε-greedy step at at.epsilon; its completed transitions go into the replay. False when
/// nothing was legal: the episode ends early and no step was taken.
bool act(DqnActor &actor, Learner &learner, Environment &env, bool graph, PrioritizedReplay &replay,
         RunSnapshot &at) {
    actor.completed.clear();
    const ActedStep step =
        act_epsilon_greedy(learner.online, env, graph, at.epsilon, actor.rng, actor.nstep,
                           &actor.completed, actor.current, learner.profile);
    if (!step.acted) {
        actor.in_episode = false;
        return false;
    }
    ++at.env_steps;
    actor.ep_reward += step.reward;
    actor.ep_best = std::max(actor.ep_best, env.gflops());
    for (Transition &t : actor.completed) replay.add(std::move(t));
    if (step.done) {
        ++at.episodes;
        actor.episode_reward.push(actor.ep_reward);
        actor.episode_speedup.push(actor.ep_best / std::max(actor.ep_base, 1e-9));
        actor.in_episode = false;
    }
    return true;
}

/// Learns at a fixed replay ratio (once the replay holds learning_starts transitions): the
/// updates the steps since the loop started pay for.
void learn(const TrainConfig &c, const TrainingRun &run, Learner &learner,
           PrioritizedReplay &replay, const std::vector<Demo> &demos, int64_t env_steps,
           RunningMean &loss_mean) {
    if (replay.size() < std::min<int64_t>(c.learning_starts, c.replay_capacity)) return;
    while (learner.updates <
           run.start_updates() + c.updates_per_step * (env_steps - run.start_steps()))
        loss_mean.push(learner.replay_step(replay, env_steps, &demos));
}

/// Checkpoints, evaluation, metrics and progress at their intervals, and all of them at the end.
void bookkeeping(TrainingRun &run, Learner &learner, Environment &eval_env, RunSnapshot &at) {
    const TrainConfig &c = run.config();
    const bool last = at.env_steps >= c.steps || run.out_of_time();
    if (at.env_steps % c.checkpoint_every == 0 || last) run.checkpoint(learner, at, {});
    const bool evaluate = (c.eval_every > 0 && at.env_steps % c.eval_every == 0) || last;
    if (evaluate) at.eval = run.evaluate(learner.online, eval_env);
    if (evaluate || at.env_steps % 250 == 0) run.record(at, evaluate);
    run.report(at, fmt::format("eps {:.2f}", at.epsilon), last);
}

TrainSummary train_dqn(const TrainConfig &c) {
    TrainingRun run(c);
    run.create_dir();
    Environment env(train_env_config(c)), eval_env(train_env_config(c));
    const QNetConfig net_config = net_config_for(c, env);
    Learner learner(c, net_config);
    PrioritizedReplay replay(c.replay_capacity, c.per_alpha, c.seed);
    TrainProfile profile;
    if (c.profile) learner.profile = &profile;
    run.start(learner);
    const std::vector<Demo> demos = warm_start(c, env, learner, replay, run.resumed());
    run.evaluate_start(learner.online, eval_env);

    run.loop_started(learner.updates);
    RunSnapshot at;
    at.env_steps = run.start_steps();
    at.episodes = run.start_episodes();
    at.updates = learner.updates;  // a run out of time before its first step reports 0 updates/s
    DqnActor actor(c, run.dataset(), at.env_steps);
    RunningMean loss_mean(200);
    profile.set_env_baseline(env.counters());
    const double profile_start = run.elapsed();
    while (at.env_steps < c.steps && !run.out_of_time()) {
        if (!actor.in_episode) start_episode(actor, env);
        at.epsilon = dqn_epsilon(c, at.env_steps);
        if (!act(actor, learner, env, c.graph(), replay, at)) continue;  // nothing was legal
        learn(c, run, learner, replay, demos, at.env_steps, loss_mean);
        at.updates = learner.updates;
        at.episode_reward = actor.episode_reward.mean();
        at.episode_speedup = actor.episode_speedup.mean();
        at.loss = loss_mean.mean();
        bookkeeping(run, learner, eval_env, at);
    }
    // Out of time before the first step (a warm start or the first evaluation took it all):
    // the end's checkpoint, evaluation and policy all the same.
    if (at.env_steps == run.start_steps()) bookkeeping(run, learner, eval_env, at);
    at.updates = learner.updates;
    TrainSummary summary = run.summary(at);
    summary.adapt_gain = run.adapt_gain(learner.online, eval_env);
    if (c.profile) summary.profile = profile.report(env.counters(), run.elapsed() - profile_start);
    return summary;
}

}  // namespace

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
