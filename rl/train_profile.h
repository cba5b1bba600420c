// Where a training run's time goes (`looptool train --profile`, benchmarks/train_bench.cpp):
// wall time per phase, summed over the run by scoped timers in the acting step, the learner
// and the checkpoint writer. The environment's own split (store/cache lookups, compiles,
// measurements) comes from Environment::Counters. Thread-safe: actors may share one.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "env/environment.h"
#include "rl/trainer.h"

namespace looptune {

class TrainProfile {
public:
    enum class Phase { EnvStep, Encode, Act, ReplaySample, Update, Checkpoint };
    static constexpr int kPhases = 6;

    void add(Phase p, double seconds, int64_t count = 1);
    /// The environment's counters when the profiled part of the run starts (warm-start
    /// demonstrations replayed before it do not count).
    void set_env_baseline(const Environment::Counters &env) { env_baseline_ = env; }

    /// Times a scope into `profile` (nothing when it is null).
    class Scope {
    public:
        Scope(TrainProfile *profile, Phase phase)
            : profile_(profile), phase_(phase), start_(std::chrono::steady_clock::now()) {}
        ~Scope() {
            if (profile_)
                profile_->add(
                    phase_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
                                .count());
        }
        Scope(const Scope &) = delete;
        Scope &operator=(const Scope &) = delete;

    private:
        TrainProfile *profile_;
        Phase phase_;
        std::chrono::steady_clock::time_point start_;
    };

    /// The phases of a run that took `total_seconds`, the environment step split with `env`'s
    /// counters (lookups, compiles, measurements; the rest of a step is applying the action and
    /// its legality), and "other" for what no timer covered (replay inserts, n-step
    /// bookkeeping, evaluation, metrics).
    std::vector<ProfileEntry> report(const Environment::Counters &env, double total_seconds) const;

private:
    std::array<std::atomic<int64_t>, kPhases> nanoseconds_{}, counts_{};
    Environment::Counters env_baseline_;
};

}  // namespace looptune
