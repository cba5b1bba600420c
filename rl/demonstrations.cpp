// Demonstrations (warm-start traces, DQfD): read and replayed into the replay, pretrained on,
// and drawn as contiguous rows for the learner's large-margin loss.
#include "rl/demonstrations.h"

#include <fmt/format.h>

#include <map>
#include <memory>

#include "env/store/measurement_store.h"
#include "looptool/ir/error.h"
#include "search/trace.h"

namespace looptune {

namespace {

/// Replays one trace into `replay` and `demos` as episodes of the environment's length. A trace
/// longer than an episode goes on in a fresh episode from the state where the last one ended,
/// as the guided search chains rollouts from measured states: cache blocks and conv tiles take
/// 20-50 actions, and cutting them at one episode taught only their first steps.
/// As another machine of the store (EnvConfig::machine), a schedule it has no row for ends the
/// trace there: its episodes only look rows up.
void replay_trace(const TrainConfig &config, Environment &env, const Trace &t,
                  PrioritizedReplay &replay, std::vector<Demo> &demos, bool with_graph) {
    const bool foreign = !env.config().machine.empty();
    NStepBuilder nstep(config.n_step, config.gamma);
    for (size_t i = 0; i < t.actions.size(); ++i) {
        if (env.steps_taken() >= env.config().max_steps) {
            const looptool::Program here = env.program();
            try {
                env.reset(here);
            } catch (const looptool::Error &) {
                if (!foreign) throw;
                return;
            }
            nstep = NStepBuilder(config.n_step, config.gamma);
        }
        const int a = env.action_space().index_of(t.actions[i]);
        if (a < 0 || !env.action_mask()[a]) {
            looptool::warn(fmt::format(
                "{}: action {} ({}) is not legal in space {}; trace cut there", t.benchmark, i,
                looptool::action_name(t.actions[i]), env.action_space().name));
            // The steps before the cut still teach: they bootstrap from where it stopped.
            for (Transition &tr : nstep.cut(encode_state(env, with_graph)))
                replay.add(std::move(tr));
            return;
        }
        RlState s = encode_state(env, with_graph);
        StepResult r;
        try {
            r = env.step_index(a);
        } catch (const looptool::Error &) {
            if (!foreign) throw;
            for (Transition &tr : nstep.cut(s)) replay.add(std::move(tr));
            return;
        }
        RlState next = encode_state(env, with_graph);
        demos.push_back({s, a});
        for (Transition &tr : nstep.push(s, a, static_cast<float>(r.reward), next,
                                         i + 1 == t.actions.size() || r.done))
            replay.add(std::move(tr));
    }
}

}  // namespace

std::vector<Demo> load_demonstrations(const TrainConfig &config, Environment &env,
                                      PrioritizedReplay &replay, bool with_graph) {
    std::vector<Demo> demos;
    // Clone the best: one trace per benchmark (its best), and only traces worth imitating.
    std::map<std::string, Trace> best;
    for (Trace &t : load_traces(config.warmstart)) {
        if (t.gflops < config.warmstart_min_speedup * t.base_gflops) continue;
        auto it = best.find(t.benchmark);
        if (it == best.end() || t.gflops > it->second.gflops) best[t.benchmark] = std::move(t);
    }
    if (best.empty())
        throw looptool::Error(
            fmt::format("{}: no trace reaches {}x its base (--warmstart-min-speedup)",
                        config.warmstart, config.warmstart_min_speedup));
    if (config.progress)
        config.progress(fmt::format("warm start: {} benchmarks with a trace at >= {}x", best.size(),
                                    config.warmstart_min_speedup));
    // As another machine, a benchmark whose start it has no row for is skipped.
    const bool foreign = !env.config().machine.empty();
    for (auto &[name, t] : best) {
        try {
            env.reset(t.benchmark);
        } catch (const looptool::Error &) {
            if (foreign) continue;
            throw;
        }
        t.actions = drop_cancelling_moves(env.program(), t.actions);
        replay_trace(config, env, t, replay, demos, with_graph);
    }
    return demos;
}

void pretrain_on_demonstrations(const TrainConfig &config, Learner &learner,
                                PrioritizedReplay &replay, const std::vector<Demo> &demos) {
    if (demos.empty()) return;
    if (replay.size() == 0)
        throw looptool::Error(
            fmt::format("{}: no demonstrated transition to pre-train on", config.warmstart));
    for (int64_t i = 0; i < config.warmstart_updates; ++i) {
        learner.replay_step(replay, /*env_steps=*/0, &demos);
        if (config.progress && (i + 1) % 200 == 0)
            config.progress(fmt::format("warm start: {}/{} updates on {} demonstrated steps", i + 1,
                                        config.warmstart_updates, demos.size()));
    }
}

std::vector<Demo> load_other_machines_demonstrations(const TrainConfig &config, Environment &env,
                                                     PrioritizedReplay &replay) {
    std::vector<Demo> demos;
    const EnvConfig &here = env.config();
    if (here.store_path.empty()) return demos;
    std::vector<std::string> machines;
    for (const auto &m : MeasurementStore::open_read_only(here.store_path)->stats().per_machine)
        if (m.machine != env.machine() && fingerprint_threads(m.machine) == here.threads)
            machines.push_back(m.machine);
    for (const std::string &machine : machines) {
        EnvConfig c = here;
        c.machine = machine;
        std::unique_ptr<Environment> other;
        try {
            other = std::make_unique<Environment>(c);
        } catch (const looptool::Error &e) {  // no figures of it: its vector is not known
            looptool::warn(fmt::format("warm start: machine '{}' left out: {}", machine, e.what()));
            continue;
        }
        const size_t before = demos.size();
        std::vector<Demo> more = load_demonstrations(config, *other, replay, config.graph());
        demos.insert(demos.end(), more.begin(), more.end());
        if (config.progress)
            config.progress(fmt::format("warm start: {} demonstrated steps as machine '{}'",
                                        demos.size() - before, machine));
    }
    return demos;
}

std::vector<Demo> warm_start(const TrainConfig &config, Environment &env, Learner &learner,
                             PrioritizedReplay &replay, bool resumed) {
    std::vector<Demo> demos;
    if (config.warmstart.empty()) return demos;
    demos = load_demonstrations(config, env, replay, config.graph());
    if (config.warmstart_machines) {
        std::vector<Demo> more = load_other_machines_demonstrations(config, env, replay);
        demos.insert(demos.end(), more.begin(), more.end());
    }
    if (!resumed) pretrain_on_demonstrations(config, learner, replay, demos);
    return demos;
}

void Learner::cache_demonstrations(const std::vector<Demo> &demos) {
    if (demo_source_ == &demos && demo_count_ == demos.size()) return;
    demo_source_ = &demos;
    demo_count_ = demos.size();
    const int64_t F = demos.empty() ? 0 : static_cast<int64_t>(demos[0].state.flat.size());
    const int64_t A = demos.empty() ? 0 : static_cast<int64_t>(demos[0].state.mask.size());
    demo_flat_.assign(demos.size() * F, 0.f);
    demo_masks_.assign(demos.size() * A, 0);
    demo_actions_.clear();
    for (size_t i = 0; i < demos.size(); ++i) {
        if (static_cast<int64_t>(demos[i].state.flat.size()) != F ||
            static_cast<int64_t>(demos[i].state.mask.size()) != A)
            throw looptool::Error("demonstrations of different state sizes");
        std::copy_n(demos[i].state.flat.data(), F, demo_flat_.data() + i * F);
        std::copy_n(demos[i].state.mask.data(), A, demo_masks_.data() + i * A);
        demo_actions_.push_back(demos[i].action);
    }
}

void Learner::pick_demonstrations(const std::vector<Demo> &demos, int64_t D) {
    cache_demonstrations(demos);
    std::uniform_int_distribution<size_t> pick(0, demos.size() - 1);
    const int64_t F = static_cast<int64_t>(demos[0].state.flat.size());
    const int64_t A = static_cast<int64_t>(demos[0].state.mask.size());
    demo_rows_.resize(D * F);
    demo_row_masks_.resize(D * A);
    demo_row_actions_.resize(D);
    demo_row_graphs_.clear();
    for (int64_t i = 0; i < D; ++i) {
        const size_t d = pick(demo_rng_);
        std::copy_n(demo_flat_.data() + d * F, F, demo_rows_.data() + i * F);
        std::copy_n(demo_masks_.data() + d * A, A, demo_row_masks_.data() + i * A);
        demo_row_actions_[i] = demo_actions_[d];
        demo_row_graphs_.push_back(&demos[d].state.graph);
    }
}

}  // namespace looptune
