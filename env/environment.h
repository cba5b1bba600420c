// The RL environment, in the Gym style: reset(benchmark), step(action) -> reward, done,
// info; action_mask(); observe(space).
//
// Episodes start from the benchmark's naive nest with the cursor on the first loop and last
// `max_steps` actions (10, as LoopTune). The reward is (G_t - G_{t-1}) / MAX_GFLOPS, where
// G is the measured GFLOPS of the schedule (docs/measurement.md). Cursor moves need no
// measurement. Illegal actions throw looptool::Error: agents use the mask.
//
// One Environment per thread: it owns its JIT, buffers and store connection.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "env/observations.h"
#include "env/store/measurement_store.h"
#include "looptool/actions/actions.h"
#include "looptool/actions/prepack.h"
#include "looptool/check/verify.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"

namespace looptune {

struct EnvConfig {
    std::string action_space = "looptune";  ///< preset: looptune or full
    int max_steps = 10;                     ///< actions per episode
    int max_loops = 10;                     ///< rows of loops_tensor
    std::string store_path;                 ///< SQLite measurement store; empty: none
    bool verify = false;                    ///< check each new kernel against the reference
    /// Refuse a benchmark whose buffers (and reference, with verify) need more bytes than this
    /// (--max-memory); 0: only what /proc/meminfo's MemAvailable allows.
    int64_t max_memory = 0;
    /// How the reference for verify() is computed: full, or sampled on large problems.
    looptool::ReferenceOptions reference;
    bool measure_enabled = true;  ///< false: no JIT or measurement, G is always 0
    /// The single-core peak; 0: looptool::max_gflops(). The reward's roof is threads times it.
    double max_gflops = 0;
    /// Threads a `parallel` loop runs on (JitOptions::threads; 0: every usable core). 1: the
    /// kernels of one thread, the roof the single-core peak.
    int threads = 1;
    /// The machine whose measurements and machine vector an episode sees: "" for this one;
    /// else a fingerprint of the store's rows (measurement_store.h, with its "|threads=N" when
    /// N > 1): lookups under it, its figures from the store's machines table (the reward's
    /// roof its peak), and a schedule the store lacks for it is an error, since it cannot be
    /// measured here. Training replays another machine's traces this way.
    std::string machine;
    /// Inputs declared constant (inference's weights): a schedule's packs that read only these
    /// run once outside the timed calls (looptool/actions/prepack.h), as a library's weight
    /// reorder does. Its figures are filed under their own keys, never mixed with per-call ones.
    std::vector<std::string> constant_inputs;
    /// A short protocol: env steps must stay cheap (a cache-miss step within ~25 ms).
    looptool::MeasureOptions measure{.warmup = 2,
                                     .min_runs = 5,
                                     .min_time_s = 0.01,
                                     .max_runs = 1000,
                                     .time_cap_s = 1.0,
                                     .pin_core = -1};
};

struct StepInfo {
    bool measured = false;    ///< the schedule changed and its GFLOPS were looked up
    bool from_cache = false;  ///< ... found in the in-memory cache or the store
    double gflops = 0;        ///< G_t
    double compile_ms = 0;    ///< 0 unless compiled in this step
    bool timed_out = false;
    int step = 0;
};

struct StepResult {
    double reward = 0;
    bool done = false;
    StepInfo info;
};

class Environment {
public:
    explicit Environment(EnvConfig config = {});
    ~Environment();

    /// Starts an episode on the naive nest of `benchmark` (a file in either format).
    void reset(const std::string &benchmark_path);
    /// Starts an episode on `program` as given (its schedule and cursor).
    void reset(const looptool::Program &program);

    StepResult step(looptool::Action a);
    /// step() by index into the action space.
    StepResult step_index(int action_index);

    std::vector<bool> action_mask() const;
    Observation observe(const std::string &space) const;

    const looptool::Program &program() const { return program_; }
    const looptool::ActionSpace &action_space() const { return space_; }
    const EnvConfig &config() const { return config_; }
    double gflops() const { return gflops_; }
    double runtime_s() const;
    double max_gflops() const { return max_gflops_; }
    /// The machine vector of every observation (machine_vector() of EnvConfig::machine's figures
    /// and threads).
    const std::vector<float> &machine_vector() const { return machine_vector_; }
    /// The fingerprint measurements are looked up and stored under.
    const std::string &machine() const { return machine_; }
    int steps_taken() const { return steps_; }
    const std::vector<looptool::Action> &history() const { return history_; }

    /// GFLOPS of any program of the current benchmark (measured, or a cache/store lookup),
    /// without changing the episode. Searches use this.
    double evaluate(const looptool::Program &p, StepInfo *info = nullptr);

    /// The protocol of the measurements from now on, instead of EnvConfig::measure: a search
    /// measures with fewer calls and a time cap derived from its best so far, so a state that is
    /// clearly slower costs a few of the best's call times instead of up to the configured cap.
    /// What it measures goes to the in-memory cache only, never to the store, and a measurement
    /// it cut short (StepInfo::timed_out: its GFLOPS may be only an upper bound) leaves the
    /// cache again at reset_measure_options(). Throws looptool::Error for bad options.
    void set_measure_options(const looptool::MeasureOptions &m);
    /// Back to EnvConfig::measure (and to whole kernels: set_prefix_flops(0)).
    void reset_measure_options();
    /// Under set_measure_options(): a kernel is measured on a prefix of its outermost loop with
    /// about `target_flops` (looptool/measure/prefix.h) when that is at most `max_share` of the
    /// loop, its figure the prefix's GFLOPS (or, where some of its work does not shrink with the
    /// prefix, the whole kernel's time on the line through two prefix lengths). Such figures stay
    /// in the in-memory cache until reset_measure_options(), which ends this too. 0: whole kernels.
    /// A search on a 2048^3 matmul (0.16 s a call) spent 8 s measuring whole kernels
    /// (docs/decisions.md).
    void set_prefix_flops(double target_flops, double max_share = 0.125);
    /// Measurements taken on a prefix since the environment was made.
    int64_t prefix_measurements() const { return prefix_measurements_; }
    /// evaluate(p) with a fresh measurement under the current protocol, whatever the cache holds
    /// (a search's finalists, first measured with fewer calls).
    double measure_again(const looptool::Program &p, StepInfo *info = nullptr);
    const looptool::MeasureOptions &measure_options() const { return measure_; }
    /// Whether p's GFLOPS in the cache come from a measurement cut short by its time cap under
    /// set_measure_options(): then from the calls that fit, or an upper bound if none did.
    bool cut_short(const looptool::Program &p) const;

    /// Runs p's JIT kernel on the environment's random inputs and compares its outputs with the
    /// double-precision reference (computed once per computation; sampled on large problems,
    /// EnvConfig::reference): `tolerance` is a factor on the forward error bound.
    /// With constant inputs (EnvConfig::constant_inputs), a prepacked schedule's prepare, then
    /// its run.
    looptool::Comparison verify(const looptool::Program &p, double tolerance = 1);
    /// EnvConfig::constant_inputs from now on (compare's judge measures methods with and
    /// without them); checked against the current benchmark at each evaluation.
    void set_constant_inputs(std::vector<std::string> names);

    struct Counters {
        int64_t compiles = 0, measurements = 0, cache_hits = 0, store_hits = 0, verified = 0;
        /// Wall time in evaluate(): schedule key + in-memory and store lookups, JIT compiles,
        /// measurements (train --profile's split of an environment step).
        double lookup_seconds = 0, compile_seconds = 0, measure_seconds = 0;
    };
    const Counters &counters() const { return counters_; }

private:
    EnvConfig config_;
    looptool::ActionSpace space_;
    std::unique_ptr<looptool::Jit> jit_;
    std::unique_ptr<MeasurementStore> store_;
    std::string machine_;
    bool foreign_machine_ = false;  // EnvConfig::machine names another machine: lookups only
    std::vector<float> machine_vector_;
    double max_gflops_ = 0;
    void use_foreign_machine();

    looptool::Program program_;
    looptool::Buffers buffers_;
    looptool::Reference reference_;  // of buffers_'s inputs
    bool have_reference_ = false;
    void ensure_reference();
    std::unordered_map<std::string, double> cache_;  // schedule_key -> GFLOPS
    looptool::MeasureOptions measure_;               // the protocol in use
    bool custom_measure_ = false;                    // set_measure_options() is in force
    std::vector<std::string> cut_keys_;              // cut short under a custom protocol
    double prefix_flops_ = 0, prefix_share_ = 0;     // set_prefix_flops()
    std::vector<std::string> prefix_keys_;           // measured on a prefix
    int64_t prefix_measurements_ = 0;
    /// The key p's figure is cached and stored under: schedule_key(p), or for a split its own.
    static std::string cache_key(const looptool::Program &p,
                                 const std::optional<looptool::Prepacked> &split);
    /// p's split when constant inputs are declared and some pack reads only them.
    std::optional<looptool::Prepacked> prepacked(const looptool::Program &p) const;
    /// compile_and_measure() for a split: prepare run once, run's kernel timed.
    looptool::Measurement measure_prepacked(const looptool::Program &p,
                                            const looptool::Prepacked &s, StepInfo &out);
    /// Compiles p (verifying it when configured) and measures `run` (p, or its prefix) with `o`.
    looptool::Measurement compile_and_measure(const looptool::Program &p,
                                              const looptool::Program &run,
                                              const looptool::MeasureOptions &o, StepInfo &out);
    /// evaluate()'s measurement of p on prefixes (set_prefix_flops()); nullopt: p is measured
    /// whole.
    std::optional<looptool::Measurement> measure_on_prefix(const looptool::Program &p,
                                                           StepInfo &out);
    double gflops_ = 0;
    int steps_ = 0;
    std::vector<looptool::Action> history_;
    Counters counters_;
};

}  // namespace looptune
