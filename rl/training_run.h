// The bookkeeping every trainer shares (DQN, Ape-X on threads, Ape-X over MPI), in one object
// so the algorithm files hold only the algorithm: the settings checked and the dataset read
// before anything is created, the run directory, resume counters, checkpoints, metrics.csv,
// the progress line and the summary.
//
// Order of use: TrainingRun run(config) (reads, creates nothing: bad input leaves no
// files) -> run.create_dir() (only the process that writes) -> build environments and the
// learner -> run.start(learner) (resume, metrics) -> the loop calling checkpoint / record /
// report -> run.summary(...).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "rl/episode_starts.h"
#include "rl/learner.h"
#include "rl/metrics.h"
#include "rl/trainer.h"

namespace looptune {

class Learner;

/// Where a trainer is, as the run object reports it.
struct RunSnapshot {
    int64_t env_steps = 0, episodes = 0, updates = 0;
    double epsilon = 0, episode_reward = 0, episode_speedup = 0, loss = 0;
    Evaluation eval;  ///< the latest evaluation; -1s: none yet
};

class TrainingRun {
public:
    /// Checks the settings and reads the dataset (and the warm-start traces, when given);
    /// throws looptool::Error for bad ones. Creates nothing.
    explicit TrainingRun(const TrainConfig &config);
    ~TrainingRun();

    /// Creates the run directory and removes the temporaries a killed write left behind; refuses
    /// a directory that holds a run unless config.resume.
    void create_dir();
    /// Resumes `learner` from the checkpoint when asked and one exists, trims metrics.csv to the
    /// checkpoint's step and opens it, and starts the clock. Rank 0 only, under MPI.
    void start(Learner &learner);
    /// The training loop starts now, with the learner at `updates` (after any warm start): the
    /// base of the replay ratio and of the steps/s and updates/s figures.
    void loop_started(int64_t updates);

    const TrainConfig &config() const { return c_; }
    const Dataset &dataset() const { return dataset_; }
    bool resumed() const { return resumed_; }
    int64_t start_steps() const { return start_steps_; }
    int64_t start_episodes() const { return start_episodes_; }
    int64_t start_updates() const { return start_updates_; }  ///< at loop_started()
    /// Seconds since start() in this process.
    double elapsed() const;
    /// Whether --max-seconds has run out.
    bool out_of_time() const { return c_.max_seconds > 0 && elapsed() >= c_.max_seconds; }

    /// The policy's greedy rollouts on the evaluation benchmarks (evaluate_policy): the geomean
    /// speedup over the naive nests and, with seed starts, the gain over tune's seeds. A benchmark
    /// that fails is reported on stderr, left out of this and every later evaluation, and listed in
    /// the summary (TrainSummary::failed); the run goes on. Throws looptool::Error when no
    /// evaluation benchmark is left.
    Evaluation evaluate(QNet &net, Environment &env);
    /// With an initial policy on a fresh run: its evaluation before the first step, recorded in
    /// metrics.csv and the summary (the figure adaptation starts from).
    void evaluate_start(QNet &net, Environment &env);
    /// With an initial policy: the trained network against it, side by side (compare_policies);
    /// -1 without one or without evaluation benchmarks.
    double adapt_gain(QNet &trained, Environment &env);

    /// Writes checkpoint.pt and trained.policy (atomically) and says so.
    void checkpoint(Learner &learner, const RunSnapshot &at, const nlohmann::json &provenance);
    /// One metrics.csv row.
    void record(const RunSnapshot &at, bool with_eval);
    /// The progress line (at most every 2 s unless `now`); `who` names the actors, `state`
    /// replaces the ETA when not empty.
    void report(const RunSnapshot &at, const std::string &who, bool now = false,
                const std::string &state = "");
    /// One line that stays on screen (resume, checkpoint).
    void note(const std::string &line) const;
    TrainSummary summary(const RunSnapshot &at) const;

    std::string checkpoint_path, policy_path, metrics_path;
    double eval_start_speedup = -1;

private:
    double steps_per_second(const RunSnapshot &at) const;
    double updates_per_second(const RunSnapshot &at) const;

    const TrainConfig &c_;
    Dataset dataset_;
    std::vector<std::string> eval_files_;
    std::vector<FailedBenchmark> eval_failed_;
    std::unique_ptr<EpisodeStarts> eval_seeds_;  // with seed starts: the evaluation's seeds
    mutable std::mutex eval_mutex_;  // evaluate() may run on a thread of its own (Ape-X, MPI)
    bool resumed_ = false;
    int64_t start_steps_ = 0, start_episodes_ = 0, start_updates_ = 0;
    double seconds_before_ = 0, last_report_ = -10;
    std::chrono::steady_clock::time_point t0_, loop_t0_;
    std::unique_ptr<MetricsWriter> metrics_;
};

}  // namespace looptune
