// Pieces DQN and Ape-X share (LibTorch; agents/*.cpp only): the learner (double-Q n-step TD
// loss with importance weights, target network, optimizer, checkpoints), the large-margin
// demonstration loss for warm starts, and policy evaluation.
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "rl/dense_qnet.h"
#include "rl/qnet.h"
#include "rl/replay.h"
#include "rl/train_profile.h"
#include "rl/trainer.h"

namespace looptune {

torch::Device pick_device(const std::string &name);

struct Demo {
    RlState state;
    int action = 0;
};

class Learner {
public:
    Learner(const TrainConfig &config, const QNetConfig &net_config);
    /// One gradient step on a prioritized sample; returns the loss and writes the new
    /// priorities (|TD error| + 1e-3) into `priorities`.
    float update(const ReplaySample &batch, std::vector<float> *priorities,
                 const std::vector<Demo> *demos = nullptr);
    /// One prioritized-replay step: samples a batch with the IS exponent annealed from
    /// per_beta to 1 over the run (at `env_steps` of config.steps), updates (with the
    /// demonstrations' margin loss when `demos` is non-empty, holding `update_lock` if given)
    /// and writes the new priorities back. Returns the loss.
    float replay_step(PrioritizedReplay &replay, int64_t env_steps, const std::vector<Demo> *demos,
                      std::mutex *update_lock = nullptr);
    void sync_target();
    /// Whether updates take the dense path (rl/dense_qnet.h: on the CPU, unless
    /// TrainConfig::autograd_learner) rather than LibTorch's autograd.
    bool dense() const { return dense_online_ != nullptr; }
    /// |TD error| of transitions under `net` as both online and target (actors' priorities).
    static std::vector<float> td_errors(QNet &net, const std::vector<Transition> &ts,
                                        double gamma_unused = 0);

    void save_checkpoint(const std::string &path, const nlohmann::json &counters);
    /// false when there is no checkpoint at `path`.
    bool load_checkpoint(const std::string &path, nlohmann::json *counters);
    void save_policy(const std::string &path, const nlohmann::json &provenance);
    /// Online and target networks take the weights of the flat policy file at `path`; throws
    /// looptool::Error naming a tensor whose shape differs from this network's.
    void start_from(const std::string &path);

    QNet online{nullptr}, target{nullptr};
    int64_t updates = 0;
    TrainProfile *profile = nullptr;  ///< when set, sampling, updates and checkpoints are timed

private:
    // Defined in rl/demonstrations.cpp.
    /// The demonstrations as contiguous rows, built once per demonstration set.
    void cache_demonstrations(const std::vector<Demo> &demos);
    /// Draws `count` demonstrations (with replacement) into demo_rows_, demo_row_masks_,
    /// demo_row_actions_ and demo_row_graphs_.
    void pick_demonstrations(const std::vector<Demo> &demos, int64_t count);
    /// update() through LibTorch's autograd (any encoder, any device) or by hand (dense()).
    float update_autograd(const ReplaySample &batch, std::vector<float> *priorities, int64_t D);
    float update_dense(const ReplaySample &batch, std::vector<float> *priorities, int64_t D);
    const TrainConfig &config_;
    QNetConfig net_config_;
    torch::Device device_;
    std::unique_ptr<torch::optim::Adam> optimizer_;
    // Reused across updates so that a step allocates no host buffers of its own.
    ReplaySample sample_;
    std::vector<float> priorities_;
    std::mt19937_64 demo_rng_;  // which demonstrations join each update's margin loss
    const std::vector<Demo> *demo_source_ = nullptr;
    size_t demo_count_ = 0;
    std::vector<float> demo_flat_, demo_rows_;
    std::vector<uint8_t> demo_masks_, demo_row_masks_;
    std::vector<int64_t> demo_actions_, demo_row_actions_;
    std::vector<const DenseGraph *> demo_row_graphs_;
    std::unique_ptr<DenseQNet> dense_online_, dense_target_;
    std::vector<float> dq_, td_, margin_;         // the dense path's dL/dQ, TD errors, margins
    std::vector<const DenseGraph *> graph_ptrs_;  // and its batch's graphs (gnn)
};

/// Environment settings for training and evaluation.
EnvConfig train_env_config(const TrainConfig &config);

/// A benchmark an evaluation could not run, and why (the first line of the error).
struct FailedBenchmark {
    std::string file, reason;
};

/// What an evaluation measured (geomeans over the benchmarks that ran; -1: not measured).
struct Evaluation {
    double speedup = -1;  ///< the greedy rollout from the naive nest: best-seen GFLOPS / naive
    /// With seed starts: the best of the seeds and the greedy rollouts from each seed's state,
    /// over the best seed (>= 1; above 1 where the policy improves on the demonstrations).
    double seed_gain = -1;
};

class EpisodeStarts;

/// Greedy rollouts of `net` on `files` from each naive nest and, with `seeds`, from each of
/// tune's seed states. A benchmark that throws is left out and appended to `failed`; 0 when
/// none ran.
Evaluation evaluate_policy(QNet &net, Environment &env, const std::vector<std::string> &files,
                           bool with_graph, std::vector<FailedBenchmark> &failed,
                           EpisodeStarts *seeds = nullptr);
/// Networks `a` and `b` side by side: on each benchmark of `files`, the best GFLOPS of a's greedy
/// rollouts (from the naive nest and, with `seeds`, from each seed's state), then b's; the
/// geomean of b's over a's (0 when no benchmark could be run; failing ones are skipped).
double compare_policies(QNet &a, QNet &b, Environment &env, const std::vector<std::string> &files,
                        bool with_graph, EpisodeStarts *seeds);

/// One ε-greedy choice over the legal actions.
int epsilon_greedy(QNet &net, const RlState &s, double eps, std::mt19937_64 &rng);

/// What one acting step did.
struct ActedStep {
    bool acted = false;  ///< false: nothing was legal, and nothing happened
    bool done = false;   ///< the episode ended with this step
    double reward = 0;
};
/// One ε-greedy step of an actor under the mask: acts in `env` and appends the n-step
/// transitions this step completes to `completed`. The loop every trainer's actors run.
/// `current` is env's state encoded (empty `flat`: not yet, as after a reset) and becomes the
/// state after the step, so each state is encoded once.
ActedStep act_epsilon_greedy(QNet &net, Environment &env, bool with_graph, double eps,
                             std::mt19937_64 &rng, NStepBuilder &nstep,
                             std::vector<Transition> *completed, RlState &current,
                             TrainProfile *profile = nullptr);

/// Mean of the last `n` values pushed.
class RunningMean {
public:
    explicit RunningMean(size_t n = 50) : n_(n) {}
    void push(double v);
    double mean() const;
    bool empty() const { return values_.empty(); }

private:
    size_t n_;
    std::vector<double> values_;
    size_t next_ = 0;
};

}  // namespace looptune

namespace looptune {
QNetConfig net_config_for(const TrainConfig &config, const Environment &env);
}  // namespace looptune
