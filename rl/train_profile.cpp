#include "rl/train_profile.h"

#include <algorithm>

namespace looptune {

void TrainProfile::add(Phase p, double seconds, int64_t count) {
    const int i = static_cast<int>(p);
    nanoseconds_[i] += static_cast<int64_t>(seconds * 1e9);
    counts_[i] += count;
}

static const char *phase_name(TrainProfile::Phase p) {
    switch (p) {
        case TrainProfile::Phase::EnvStep: return "env step";
        case TrainProfile::Phase::Encode: return "observation encoding";
        case TrainProfile::Phase::Act: return "acting (network)";
        case TrainProfile::Phase::ReplaySample: return "replay sampling";
        case TrainProfile::Phase::Update: return "learner update";
        case TrainProfile::Phase::Checkpoint: return "checkpointing";
    }
    return "?";
}

std::vector<ProfileEntry> TrainProfile::report(const Environment::Counters &now,
                                               double total_seconds) const {
    Environment::Counters env = now;
    const Environment::Counters &b = env_baseline_;
    env.lookup_seconds -= b.lookup_seconds;
    env.compile_seconds -= b.compile_seconds;
    env.measure_seconds -= b.measure_seconds;
    env.cache_hits -= b.cache_hits;
    env.store_hits -= b.store_hits;
    env.compiles -= b.compiles;
    env.measurements -= b.measurements;
    std::vector<ProfileEntry> out;
    double covered = 0;
    for (int i = 0; i < kPhases; ++i) {
        const auto phase = static_cast<Phase>(i);
        const double s = nanoseconds_[i].load() * 1e-9;
        covered += s;
        out.push_back({phase_name(phase), s, counts_[i].load()});
        if (phase == Phase::EnvStep) {
            // The step's parts, indented under it; they do not add to `covered`.
            const double inside = env.lookup_seconds + env.compile_seconds + env.measure_seconds;
            out.push_back({"  env: cache and store lookups", env.lookup_seconds,
                           env.cache_hits + env.store_hits});
            out.push_back({"  env: JIT compiles", env.compile_seconds, env.compiles});
            out.push_back({"  env: measurements", env.measure_seconds, env.measurements});
            out.push_back({"  env: apply and legality", std::max(0.0, s - inside), 0});
        }
    }
    out.push_back({"other (replay inserts, n-step, evaluation, metrics)",
                   std::max(0.0, total_seconds - covered), 0});
    return out;
}

}  // namespace looptune
