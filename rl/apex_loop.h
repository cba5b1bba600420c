// Ape-X's two loops, written once: the actor loop and the learner loop run the same whether the
// actors are threads of this process (rl/apex.cpp) or threads of other MPI ranks
// (rl/mpi/apex_mpi.cpp); only the link between them differs (where transitions go, where
// weights come from, who allows the next step).
//
// The replay ratio (config.updates_per_step, learner updates per environment step) is a setting
// enforced from both sides once learning has started: the learner never runs ahead of it, and
// actors may not run more than a small slack ahead of what the learner has done (threads wait
// in claim_step; over MPI, rank 0 grants no steps past it). Actors act with their own copy of
// the network, refreshed when the learner publishes a new version, so the learner never waits
// for an actor's inference.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "rl/first_error.h"
#include "rl/learner.h"

namespace looptune {

/// Ape-X's exploration rate of actor i of n: eps^(1 + alpha * i / (n - 1)).
double apex_epsilon(const TrainConfig &c, int i, int n);

/// Pacing: what the learner has done, for actors (or rank 0's grants) to keep the replay ratio.
struct ApexPace {
    ApexPace(const TrainConfig &c, int64_t start_steps, int64_t start_updates,
             const PrioritizedReplay &replay)
        : config(c),
          start_steps(start_steps),
          start_updates(start_updates),
          updates(start_updates),
          replay_(replay) {}
    /// Learning starts once the replay holds learning_starts transitions; whoever sees it first
    /// (learner, actor, rank 0's grants) says so, so a starved learner thread cannot let the
    /// actors run free.
    void observe();
    /// Env steps (in all, resumes included) that actors may have taken by now: unlimited until
    /// learning starts or when the ratio is 0, then `slack` past what the updates so far pay for.
    int64_t step_limit(int64_t slack) const;
    /// Updates the learner owes at `env_steps`.
    double update_target(int64_t env_steps) const;

    const TrainConfig &config;
    const int64_t start_steps, start_updates;
    std::atomic<bool> learning{false};  ///< the replay holds learning_starts transitions
    std::atomic<int64_t> updates;       ///< the learner's count, readable from any thread
    std::atomic<double> loss{0};        ///< running mean of the last 200 losses

private:
    const PrioritizedReplay &replay_;
};

/// What an actor needs from where it runs. Called from the actor's thread.
class ActorLink {
public:
    virtual ~ActorLink() = default;
    virtual bool stopping() const = 0;
    /// Reserves one env step (the run's budget and the pacing); false: wait and ask again.
    virtual bool claim_step() = 0;
    /// The reserved step was not taken (nothing was legal), or was taken.
    virtual void release_step() = 0;
    virtual void step_taken() = 0;
    /// Copies the learner's weights into `net` when they are newer than `*version`.
    virtual void refresh(QNet &net, int64_t *version) = 0;
    /// Transitions with the priorities the actor computed, for the replay.
    virtual void send(std::vector<Transition> &transitions,
                      const std::vector<float> &priorities) = 0;
    /// An episode that ended (one cut short by the stop is not reported: its return is partial).
    virtual void episode_done(double reward, double speedup) = 0;
};

/// Actor `id` of `num_actors`: its own environment, JIT and network copy, ε-greedy at
/// apex_epsilon(id), until the link says stop. Throws what acting throws.
void run_apex_actor(int id, int num_actors, const TrainConfig &c, const Dataset &dataset,
                    const QNetConfig &net_config, int64_t start_steps, ActorLink &link);

/// What the learner needs from where it runs. Called from the learner's thread.
class LearnerLink {
public:
    virtual ~LearnerLink() = default;
    virtual bool stopping() const = 0;
    /// Env steps taken by all actors so far (resumes included), as far as the learner knows.
    virtual int64_t env_steps() const = 0;
    /// Makes the online network's weights available to actors (every weight_sync updates).
    virtual void publish(const QNet &online) = 0;
};

/// Learns from `replay` at the configured ratio until the link says stop; holds
/// `learner_mutex` during each update (checkpoints and evaluation snapshots take it).
void run_apex_learner(const TrainConfig &c, Learner &learner, PrioritizedReplay &replay,
                      const std::vector<Demo> &demos, std::mutex &learner_mutex, ApexPace &pace,
                      LearnerLink &link);

}  // namespace looptune
