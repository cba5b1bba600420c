// `looptool train`: DQN (rl/dqn.cpp) and Ape-X (rl/apex.cpp; across MPI ranks,
// rl/mpi/apex_mpi.cpp) over the environment, in process with LibTorch. Every hyper-parameter
// is in TrainConfig (settable from the CLI).
// A run directory holds: checkpoint.pt (weights, target, optimizer, counters; written
// atomically every checkpoint_every env steps), trained.policy (the online network as a flat
// policy file for `looptool tune`, policy/policy_file.h), metrics.csv (appended; trimmed to the
// checkpoint on resume; rl/metrics.h) and store.sqlite unless a store is given.
// rl/training_run.h keeps it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "policy/policy_file.h"  // kMaxEpisodeSteps

namespace looptune {

/// The settings given as words on the command line, parsed once (cli/cmd_train.cpp) into these.
enum class Trainer { Dqn, Apex };
enum class Encoder { Mlp, Gnn };          ///< Gnn: states carry their loop-tree graph
enum class Distributed { Threads, Mpi };  ///< Ape-X actors as threads, or as MPI ranks

const char *name(Trainer t);
const char *name(Encoder e);
const char *name(Distributed d);

struct TrainConfig {
    // What to train on and where to write.
    std::string dataset_dir;
    uint64_t split_seed = 0;
    std::string out_dir;
    bool resume = false;  ///< continue from out_dir/checkpoint.pt when present
    Trainer trainer = Trainer::Dqn;
    int64_t steps = 20000;   ///< environment steps in total (all actors)
    double max_seconds = 0;  ///< stop earlier after this long (0: no limit)
    uint64_t seed = 0;
    std::string warmstart;             ///< trace CSV (`looptool search --trace`); empty: none
    int64_t warmstart_updates = 2000;  ///< supervised updates on the traces before RL
    double demo_margin = 0.1;          ///< large-margin loss for demonstrated actions (DQfD)
    double warmstart_min_speedup = 2;  ///< only the best trace per benchmark, and only if this good
    /// The traces are replayed too as every other machine the store has rows and figures of
    /// (with this run's threads): rewards from that machine's rows, states with its machine
    /// vector; a trace stops at its first schedule the store lacks for that machine.
    bool warmstart_machines = false;
    /// Probability that an episode starts at the state one of `tune`'s seeds reaches
    /// (rl/episode_starts.h) instead of the naive nest; 0: always the naive nest.
    double seed_starts = 0;
    /// Start from this flat policy's weights (`train --adapt`), evaluated before the first step;
    /// its network must have this run's shape. Ignored when a checkpoint is resumed.
    std::string init_policy;

    // Environment.
    std::string action_space = "full";
    int max_steps =
        16;  ///< actions per episode (the tile takes ~12 in `full`); <= kMaxEpisodeSteps
    int max_loops = 10;
    std::string store_path;  ///< default: out_dir/store.sqlite
    /// Threads parallel loops run on (EnvConfig::threads; 0: every usable core): rewards are
    /// measured against N times the single-core peak; the `threads` observation carries N.
    int threads = 1;

    // Network.
    Encoder encoder = Encoder::Mlp;
    int hidden = 256;
    int gnn_hidden = 64;
    int gnn_rounds = 3;

    // DQN.
    double lr = 2.5e-4;
    double gamma = 0.99;
    int n_step = 3;
    int batch = 64;
    int64_t replay_capacity = 50000;
    double per_alpha = 0.6;
    double per_beta = 0.4;           ///< annealed to 1 over the run
    int64_t learning_starts = 1000;  ///< transitions in replay before learning
    int64_t target_update = 500;     ///< learner updates between target syncs
    double grad_clip = 10;
    /// Updates through LibTorch's autograd instead of the dense path (rl/dense_qnet.h): the
    /// same loss and gradients, 3-5x slower; for checking one against the other.
    bool autograd_learner = false;
    double eps_start = 1.0, eps_end = 0.05;
    int64_t eps_decay_steps = 10000;
    double updates_per_step =
        0.5;  ///< learner updates per environment step (replay ratio; Ape-X paces to it)

    // Ape-X.
    int actors = 2;
    double apex_eps = 0.4, apex_alpha = 7;  ///< eps_i = eps^(1 + alpha * i / (N - 1))
    int64_t weight_sync = 100;              ///< learner updates between weight publications
    Distributed distributed = Distributed::Threads;  ///< Mpi: rank 0 learns, the others act
    double mpi_timeout = 60;  ///< seconds an MPI rank may stay silent before the run stops

    // Bookkeeping.
    int64_t checkpoint_every = 2000;  ///< env steps
    int64_t eval_every = 5000;        ///< env steps; 0: only at the end
    int eval_benchmarks = 25;         ///< first N of the test split
    std::string device = "auto";      ///< auto | cpu | cuda
    bool profile = false;  ///< time each phase of the run (TrainSummary::profile; dqn only)

    bool graph() const { return encoder == Encoder::Gnn; }  ///< whether states need their graph

    std::function<void(const std::string &)> progress;  ///< one status line at a time
    std::function<void(const std::string &)>
        note;  ///< a line that stays (resume, checkpoint); default: progress
};

/// One phase of a profiled run (`train --profile`).
struct ProfileEntry {
    std::string phase;
    double seconds = 0;
    int64_t count = 0;  ///< how often it ran (0 where that means nothing, such as "other")
};

struct TrainSummary {
    int64_t env_steps = 0, episodes = 0, updates = 0;
    double seconds = 0;
    double eval_speedup = 0;     ///< geomean over the evaluated test benchmarks, last evaluation
    double eval_seed_gain = -1;  ///< with seed starts: the policy's gain over tune's seeds
    double eval_start_speedup = -1;  ///< with init_policy: eval_speedup before the first step
    /// With init_policy: the trained network over the initial one, side by side on the
    /// evaluation benchmarks (compare_policies); -1 when not measured.
    double adapt_gain = -1;
    bool resumed = false;
    bool primary = true;  ///< false on MPI ranks other than 0: they report nothing
    std::string policy_path, metrics_path;
    std::vector<ProfileEntry> profile;  ///< with config.profile: the phases, in run order
    /// Evaluation benchmarks that failed (left out of the evaluations), with the reason.
    std::vector<std::pair<std::string, std::string>> failed;
};

/// Why an adapted network must not replace the initial one, "" when it may: side by side it was
/// slower (adapt_gain < 1), or its greedy rollouts' held-out figure fell below the one measured
/// before the first step (a fine-tune can gain from seed starts while forgetting the rest).
std::string adapt_refusal(const TrainSummary &s);

/// Trains per config.trainer; throws looptool::Error for bad settings or files.
TrainSummary train(const TrainConfig &config);

}  // namespace looptune
