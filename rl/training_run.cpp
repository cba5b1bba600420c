#include "rl/training_run.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "looptool/ir/error.h"
#include "policy/policy_extend.h"
#include "rl/learner.h"
#include "rl/policy_convert.h"
#include "search/trace.h"
#include "util/stats.h"

namespace looptune {

const char *name(Trainer t) {
    switch (t) {
        case Trainer::Dqn: return "dqn";
        case Trainer::Apex: return "apex";
    }
    ::looptool::internal_check_failed("a valid enum value", __FILE__, __LINE__, "bad Trainer");
}

const char *name(Encoder e) {
    switch (e) {
        case Encoder::Mlp: return "mlp";
        case Encoder::Gnn: return "gnn";
    }
    ::looptool::internal_check_failed("a valid enum value", __FILE__, __LINE__, "bad Encoder");
}

const char *name(Distributed d) {
    switch (d) {
        case Distributed::Threads: return "threads";
        case Distributed::Mpi: return "mpi";
    }
    ::looptool::internal_check_failed("a valid enum value", __FILE__, __LINE__, "bad Distributed");
}

TrainingRun::TrainingRun(const TrainConfig &config) : c_(config) {
    if (c_.out_dir.empty()) throw looptool::Error("--out RUN_DIR is required");
    if (c_.steps <= 0) throw looptool::Error("--steps must be positive");
    if (c_.batch <= 0 || c_.n_step <= 0 || c_.checkpoint_every <= 0 || c_.target_update <= 0)
        throw looptool::Error(
            "--batch, --n-step, --checkpoint-every and --target-update must be positive");
    if (c_.gamma <= 0 || c_.gamma > 1) throw looptool::Error("--gamma must be in (0, 1]");
    if (!(c_.updates_per_step >= 0) || !std::isfinite(c_.updates_per_step))
        throw looptool::Error("--updates-per-step must be a finite number >= 0");
    if (c_.actors < 1) throw looptool::Error("--actors must be at least 1");
    if (!(c_.seed_starts >= 0 && c_.seed_starts <= 1))
        throw looptool::Error("--seed-starts must be a probability in [0, 1]");
    checkpoint_path = c_.out_dir + "/checkpoint.pt";
    policy_path = c_.out_dir + "/trained.policy";
    metrics_path = c_.out_dir + "/metrics.csv";
    if (!c_.resume && std::filesystem::exists(checkpoint_path))
        throw looptool::Error(c_.out_dir +
                              " already holds a run (checkpoint.pt); pass --resume to continue it "
                              "or choose another --out");
    dataset_ = Dataset::load(c_.dataset_dir, c_.split_seed);
    if (dataset_.train.empty())
        throw looptool::Error("the train split of " + c_.dataset_dir + " is empty");
    // Spread over the split (sorted by name), so a dataset of several kinds (conv*, mm*) is
    // evaluated on each.
    const size_t n_test = dataset_.test.size();
    if (c_.eval_benchmarks >= 0 && n_test > size_t(c_.eval_benchmarks))
        for (size_t i = 0; i < size_t(c_.eval_benchmarks); ++i)
            eval_files_.push_back(dataset_.test[i * n_test / size_t(c_.eval_benchmarks)]);
    else
        eval_files_ = dataset_.test;
    if (c_.seed_starts > 0) eval_seeds_ = std::make_unique<EpisodeStarts>(c_, dataset_);
    if (!c_.warmstart.empty())
        load_traces(c_.warmstart);  // read again by the trainer; here: fail early
}

TrainingRun::~TrainingRun() = default;

void TrainingRun::create_dir() {
    std::filesystem::create_directories(c_.out_dir);
    // A write killed between its temporary and the rename leaves NAME.tmp.PID behind.
    for (const auto &entry : std::filesystem::directory_iterator(c_.out_dir)) {
        const std::string name = entry.path().filename().string();
        for (const char *file : {"checkpoint.pt.tmp.", "trained.policy.tmp.", "metrics.csv.tmp."})
            if (name.rfind(file, 0) == 0) {
                std::error_code ec;
                std::filesystem::remove(entry.path(), ec);
                if (!ec)
                    note("removed " + entry.path().string() + ", left by an interrupted write");
            }
    }
}

void TrainingRun::start(Learner &learner) {
    nlohmann::json counters = {{"env_steps", 0}, {"episodes", 0}, {"seconds", 0.0}};
    resumed_ = c_.resume && learner.load_checkpoint(checkpoint_path, &counters);
    start_steps_ = counters.value("env_steps", int64_t{0});
    start_episodes_ = counters.value("episodes", int64_t{0});
    seconds_before_ = counters.value("seconds", 0.0);
    start_updates_ = learner.updates;
    if (resumed_) {
        // Rows after the checkpoint describe steps this run takes again.
        const size_t dropped = trim_metrics(metrics_path, start_steps_);
        note(
            fmt::format("resumed from {} at step {} ({} episodes, {} updates){}; the replay is not "
                        "saved: learning "
                        "goes on after {} new transitions",
                        checkpoint_path, start_steps_, start_episodes_, start_updates_,
                        dropped ? fmt::format("; {} metrics rows past it dropped", dropped) : "",
                        std::min(c_.learning_starts, c_.replay_capacity)));
    }
    if (!resumed_ && !c_.init_policy.empty()) {
        learner.start_from(c_.init_policy);
        note("starting from the weights of " + c_.init_policy);
    }
    metrics_ = std::make_unique<MetricsWriter>(metrics_path, resumed_);
    t0_ = loop_t0_ = std::chrono::steady_clock::now();
}

void TrainingRun::loop_started(int64_t updates) {
    start_updates_ = updates;
    loop_t0_ = std::chrono::steady_clock::now();
}

static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::max(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(),
                    1e-9);
}

double TrainingRun::elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

double TrainingRun::steps_per_second(const RunSnapshot &at) const {
    return (at.env_steps - start_steps_) / seconds_since(loop_t0_);
}

double TrainingRun::updates_per_second(const RunSnapshot &at) const {
    return (at.updates - start_updates_) / seconds_since(loop_t0_);
}

void TrainingRun::checkpoint(Learner &learner, const RunSnapshot &at,
                             const nlohmann::json &provenance) {
    const nlohmann::json counters = {{"env_steps", at.env_steps},
                                     {"episodes", at.episodes},
                                     {"seconds", seconds_before_ + elapsed()}};
    learner.save_checkpoint(checkpoint_path, counters);
    nlohmann::json p = provenance;
    p.update({{"trainer", name(c_.trainer)},
              {"seed", c_.seed},
              {"env_steps", at.env_steps},
              {"dataset", c_.dataset_dir},
              {"warmstart", c_.warmstart},
              {"init_policy", c_.init_policy},
              {"seed_starts", c_.seed_starts}});
    learner.save_policy(policy_path, p);
    note(fmt::format("checkpoint at step {} ({} updates): {}", at.env_steps, learner.updates,
                     checkpoint_path));
}

void TrainingRun::record(const RunSnapshot &at, bool with_eval) {
    metrics_->write({seconds_before_ + elapsed(), at.env_steps, at.episodes, at.updates, at.epsilon,
                     at.episode_reward, at.episode_speedup, at.loss,
                     with_eval ? at.eval.speedup : -1, steps_per_second(at), updates_per_second(at),
                     with_eval ? at.eval.seed_gain : -1});
}

void TrainingRun::report(const RunSnapshot &at, const std::string &who, bool now,
                         const std::string &state) {
    if (!c_.progress || (!now && elapsed() - last_report_ < 2)) return;
    last_report_ = elapsed();
    const double rate = steps_per_second(at);
    // The end comes at --steps or --max-seconds, whichever is first.
    double left = at.env_steps > start_steps_ && seconds_since(loop_t0_) > 5
                      ? (c_.steps - at.env_steps) / rate
                      : -1;
    if (c_.max_seconds > 0) {
        const double by_time = std::max(0.0, c_.max_seconds - elapsed());
        left = left < 0 ? by_time : std::min(left, by_time);
    }
    const std::string eta = !state.empty() ? state
                            : left >= 0    ? "ETA " + format_duration(left)
                                           : std::string("ETA ?");
    const bool by_time = c_.max_seconds > 0 && c_.steps > int64_t(1) << 32;
    c_.progress(fmt::format(
        "[{}] {} | {} episodes | reward {:.3f} | speedup {:.2f}x | loss {:.4f} | {} updates"
        " | eval {}{} | {:.1f} steps/s | {:.1f} updates/s | {}",
        by_time ? fmt::format("step {} | {:.0f}/{:.0f} s", at.env_steps, elapsed(), c_.max_seconds)
                : fmt::format("{}/{}", at.env_steps, c_.steps),
        who, at.episodes, at.episode_reward, at.episode_speedup, at.loss, at.updates,
        at.eval.speedup < 0 ? std::string("-") : fmt::format("{:.2f}x", at.eval.speedup),
        at.eval.seed_gain < 0 ? std::string()
                              : fmt::format(" (seeds +{:.1f}%)", 100 * (at.eval.seed_gain - 1)),
        rate, updates_per_second(at), eta));
}

void TrainingRun::note(const std::string &line) const {
    if (c_.note)
        c_.note(line);
    else if (c_.progress)
        c_.progress(line);
}

Evaluation TrainingRun::evaluate(QNet &net, Environment &env) {
    std::vector<std::string> files;
    {
        std::lock_guard<std::mutex> g(eval_mutex_);
        files = eval_files_;
    }
    if (c_.eval_benchmarks == 0) return {};  // evaluation turned off: "-" in progress and metrics
    if (files.empty()) throw looptool::Error("evaluation: no test benchmark left to evaluate on");
    std::vector<FailedBenchmark> failed;
    const Evaluation result =
        evaluate_policy(net, env, files, c_.graph(), failed, eval_seeds_.get());
    if (failed.empty()) return result;
    std::lock_guard<std::mutex> g(eval_mutex_);
    for (const FailedBenchmark &f : failed) {
        looptool::warn(fmt::format("evaluation: {}: {} (left out of this and later evaluations)",
                                   f.file, f.reason));
        std::erase(eval_files_, f.file);
        eval_failed_.push_back(f);
    }
    if (eval_files_.empty())
        throw looptool::Error("evaluation: every test benchmark failed; the last: " +
                              failed.back().file + ": " + failed.back().reason);
    return result;
}

void TrainingRun::evaluate_start(QNet &net, Environment &env) {
    if (resumed_ || c_.init_policy.empty() || c_.eval_benchmarks == 0) return;
    RunSnapshot at;
    at.env_steps = start_steps_;
    at.eval = evaluate(net, env);
    record(at, true);
    eval_start_speedup = at.eval.speedup;
    note(fmt::format("before training: test geomean speedup {:.2f}x", at.eval.speedup));
}

double TrainingRun::adapt_gain(QNet &trained, Environment &env) {
    if (c_.init_policy.empty() || c_.eval_benchmarks == 0) return -1;
    QNet initial = qnet_from_policy_file(load_current_policy(c_.init_policy));
    std::vector<std::string> files;
    {
        std::lock_guard<std::mutex> g(eval_mutex_);
        files = eval_files_;
    }
    const double gain =
        compare_policies(initial, trained, env, files, c_.graph(), eval_seeds_.get());
    note(
        fmt::format("side by side on {} test benchmarks: the trained network reaches {:.3f}x "
                    "the initial one's GFLOPS (geomean)",
                    files.size(), gain));
    return gain;
}

TrainSummary TrainingRun::summary(const RunSnapshot &at) const {
    TrainSummary s;
    s.env_steps = at.env_steps;
    s.episodes = at.episodes;
    s.updates = at.updates;
    s.seconds = seconds_before_ + elapsed();
    s.eval_speedup = at.eval.speedup;
    s.eval_seed_gain = at.eval.seed_gain;
    s.eval_start_speedup = eval_start_speedup;
    s.resumed = resumed_;
    s.policy_path = policy_path;
    s.metrics_path = metrics_path;
    std::lock_guard<std::mutex> g(eval_mutex_);
    for (const FailedBenchmark &f : eval_failed_) s.failed.emplace_back(f.file, f.reason);
    return s;
}

std::string adapt_refusal(const TrainSummary &s) {
    if (s.adapt_gain > 0 && s.adapt_gain < 1)
        return fmt::format("side by side the trained network reaches {:.3f}x the initial one",
                           s.adapt_gain);
    if (s.eval_start_speedup > 0 && s.eval_speedup > 0 && s.eval_speedup < s.eval_start_speedup)
        return fmt::format("its greedy rollouts on the test split fell from {:.2f}x to {:.2f}x",
                           s.eval_start_speedup, s.eval_speedup);
    return "";
}

}  // namespace looptune
