#include "env/environment.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "env/observations.h"
#include "looptool/check/prepacked.h"
#include "looptool/check/reference_progress.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/ir/memory.h"
#include "looptool/measure/machine.h"
#include "looptool/measure/prefix.h"

namespace looptune {

using namespace looptool;

namespace {
bool same_figures(const MachineFigures &a, const MachineFigures &b) {
    return a.l1d_bytes == b.l1d_bytes && a.l2_bytes == b.l2_bytes && a.l3_bytes == b.l3_bytes &&
           a.vector_bits == b.vector_bits && a.cores == b.cores && a.peak_gflops == b.peak_gflops;
}
}  // namespace

Environment::Environment(EnvConfig config)
    : config_(std::move(config)),
      space_(ActionSpace::preset(config_.action_space)),
      measure_(config_.measure) {
    if (config_.max_steps < 1) throw Error("max_steps must be at least 1");
    if (config_.max_loops < 1) throw Error("max_loops must be at least 1");
    // Another machine's rows were measured on the threads its fingerprint names.
    if (!config_.machine.empty()) config_.threads = fingerprint_threads(config_.machine);
    JitOptions jo;
    jo.threads = config_.threads;
    jit_ = Jit::create(jo);
    config_.threads = jit_->threads();
    // Without measurement the roof is irrelevant (MAX_GFLOPS is not read). With N threads it is
    // N times the single-core peak. The machine vector takes the machine's own peak either way.
    max_gflops_ = config_.max_gflops > 0    ? config_.max_gflops
                  : config_.measure_enabled ? looptool::max_gflops()
                                            : 1.0;
    max_gflops_ *= config_.threads;
    const MachineFigures here = this_machine();
    machine_vector_ = looptune::machine_vector(here, config_.threads);
    if (!config_.store_path.empty()) {
        store_ = MeasurementStore::open(config_.store_path);
        // A parallel schedule's figure depends on the threads it ran on.
        machine_ = machine_fingerprint(here.peak_gflops);
        if (const auto kept = store_->machine(machine_); !kept || !same_figures(*kept, here))
            store_->put_machine(machine_, here);
        if (config_.threads > 1) machine_ += fmt::format("|threads={}", config_.threads);
    }
    if (!config_.machine.empty() && config_.machine != machine_) use_foreign_machine();
}

void Environment::use_foreign_machine() {
    if (!store_)
        throw Error(fmt::format("machine '{}': another machine's episodes need a store (its rows)",
                                config_.machine));
    const std::optional<MachineFigures> m = store_->machine(config_.machine);
    if (!m)
        throw Error(fmt::format("{}: no figures of machine '{}' (its machines table lacks it)",
                                store_->path(), base_fingerprint(config_.machine)));
    foreign_machine_ = true;
    machine_ = config_.machine;
    machine_vector_ = looptune::machine_vector(*m, config_.threads);
    if (config_.max_gflops <= 0 && m->peak_gflops > 0)
        max_gflops_ = m->peak_gflops * config_.threads;
}

Environment::~Environment() = default;

void Environment::reset(const std::string &benchmark_path) {
    Program p = load_program_file(benchmark_path);
    reset(Program::naive(p.comp));
}

void Environment::reset(const Program &program) {
    const bool same_computation =
        program_.comp && (program_.comp == program.comp || *program_.comp == *program.comp);
    check_constant_inputs(*program.comp, config_.constant_inputs);
    if (!same_computation) {
        // Refuse before allocating (and before changing the episode): the buffers, and with
        // verify the kernel's output copy and the reference.
        const Computation &c = *program.comp;
        int64_t need = buffer_bytes(c);
        if (config_.verify) need += buffer_bytes(c) + reference_bytes(c, config_.reference);
        check_memory(c, need,
                     config_.verify ? "its tensors, a copy and the reference" : "its tensors",
                     config_.max_memory);
        program_ = {};
        buffers_ = {};
        reference_ = {};
        cache_.clear();
        // cut_keys_ stay: a search switches between a computation and its packed forms (a seed
        // with `pack`), and what it measured cut short stays so until reset_measure_options().
        have_reference_ = false;
        // Without measurement no kernel runs but verify()'s: an environment that only steps (a
        // search's unmeasured rollouts) needs no buffers.
        if (config_.measure_enabled) buffers_ = make_buffers(c, 1);
    }
    program_ = program;
    steps_ = 0;
    history_.clear();
    gflops_ = evaluate(program_);
}

using Clock = std::chrono::steady_clock;

double Environment::evaluate(const Program &p, StepInfo *info) {
    StepInfo local;
    StepInfo &out = info ? *info : local;
    if (!config_.measure_enabled) return out.gflops = 0;
    out.measured = true;
    const Clock::time_point t0 = Clock::now();
    const std::optional<Prepacked> split = prepacked(p);
    const std::string key = cache_key(p, split);
    if (auto it = cache_.find(key); it != cache_.end()) {
        ++counters_.cache_hits;
        out.from_cache = true;
        counters_.lookup_seconds += seconds_since(t0);
        return out.gflops = it->second;
    }
    if (store_) {
        if (auto m = store_->lookup(p.comp->name, key, machine_)) {
            ++counters_.store_hits;
            out.from_cache = true;
            cache_[key] = m->median_gflops;
            counters_.lookup_seconds += seconds_since(t0);
            return out.gflops = m->median_gflops;
        }
    }
    counters_.lookup_seconds += seconds_since(t0);
    if (foreign_machine_)
        throw Error(
            fmt::format("{}: no measurement of this schedule of {} on machine '{}' (it "
                        "cannot be measured here)",
                        store_->path(), p.comp->name, machine_));
    out.compile_ms = 0;
    // A split is measured whole: prefix.h cuts one kernel, not prepare and run.
    const std::optional<Measurement> on_prefix = split ? std::nullopt : measure_on_prefix(p, out);
    const Measurement m = on_prefix ? *on_prefix
                          : split   ? measure_prepacked(p, *split, out)
                                    : compile_and_measure(p, p, measure_, out);
    out.timed_out = m.timed_out;
    cache_[key] = m.median_gflops;
    if (on_prefix) prefix_keys_.push_back(key);
    if (custom_measure_ && m.timed_out) cut_keys_.push_back(key);
    if (store_ && !m.timed_out && !custom_measure_ && !on_prefix)
        store_->put(p.comp->name, key, machine_, {m.median_gflops, m.runs, m.cv});
    return out.gflops = m.median_gflops;
}

Measurement Environment::compile_and_measure(const Program &p, const Program &run,
                                             const MeasureOptions &o, StepInfo &out) {
    const Clock::time_point t1 = Clock::now();
    Kernel k = jit_->compile(run);
    counters_.compile_seconds += seconds_since(t1);
    if (!k.cached) ++counters_.compiles;
    out.compile_ms += k.compile_ms;
    if (config_.verify && !k.cached) {
        Comparison cmp = verify(p);
        if (!cmp.ok)
            throw InternalError(fmt::format("JIT kernel differs from the reference: {}\n{}",
                                            cmp.first_mismatch, dump(p, false)));
    }
    const Clock::time_point t2 = Clock::now();
    Measurement m = measure_kernel(k.fn, *run.comp, buffers_, o);
    counters_.measure_seconds += seconds_since(t2);
    ++counters_.measurements;
    return m;
}

std::string Environment::cache_key(const Program &p, const std::optional<Prepacked> &split) {
    if (!split) return schedule_key(p);
    return fmt::format("prepacked {}|{}", fmt::join(split->packed, ","), schedule_key(p));
}

std::optional<Prepacked> Environment::prepacked(const Program &p) const {
    if (config_.constant_inputs.empty()) return std::nullopt;
    return split_prepacked(p, config_.constant_inputs);
}

void Environment::set_constant_inputs(std::vector<std::string> names) {
    config_.constant_inputs = std::move(names);
}

Measurement Environment::measure_prepacked(const Program &p, const Prepacked &s, StepInfo &out) {
    const Clock::time_point t1 = Clock::now();
    const Kernel prepare = jit_->compile(s.prepare), run = jit_->compile(s.run);
    counters_.compile_seconds += seconds_since(t1);
    counters_.compiles += !prepare.cached + !run.cached;
    out.compile_ms += prepare.compile_ms + run.compile_ms;
    if (config_.verify && !run.cached) {
        Comparison cmp = verify(p);
        if (!cmp.ok)
            throw InternalError(
                fmt::format("prepacked JIT kernels differ from the reference: {}\n{}",
                            cmp.first_mismatch, dump(p, false)));
    }
    // The packed tensors live beside the benchmark's buffers while run is timed.
    add_packed_buffers(s, buffers_);
    struct Drop {
        const Prepacked &s;
        Buffers &b;
        ~Drop() { drop_packed_buffers(s, b); }
    } drop{s, buffers_};
    const Clock::time_point t2 = Clock::now();
    const KernelFn fn = run_prepacked_kernels(*jit_, s, buffers_);
    Measurement m = measure_kernel(fn, *s.run.comp, buffers_, measure_);
    counters_.measure_seconds += seconds_since(t2);
    ++counters_.measurements;
    return m;
}

namespace {

// The search's protocol on a prefix holding `share` of the kernel's work: its time cap scaled
// down with it, a warm-up and three calls at least (a whole kernel's long calls are measured
// without a warm-up; a prefix's first call, cold, would weigh a third of its figure), and no cap
// on the first call: a prefix's call is short by construction, and the cold one is the longest.
// A cap on the first, cold call cut a fast kernel at half its speed (docs/decisions.md).
MeasureOptions prefix_options(MeasureOptions o, double share) {
    o.warmup = std::max(o.warmup, 1);
    o.min_runs = std::max(o.min_runs, 3);
    o.time_cap_s = std::max(o.time_cap_s * share, 2 * o.min_time_s + 0.005);
    o.first_call_cap_s = 0;
    return o;
}

}  // namespace

std::optional<Measurement> Environment::measure_on_prefix(const Program &p, StepInfo &out) {
    if (!(prefix_flops_ > 0)) return std::nullopt;
    const int64_t r = prefix_iterations(p, prefix_flops_, prefix_share_);
    if (r == 0) return std::nullopt;
    const std::optional<OuterPrefix> a = outer_prefix(p, r);
    if (!a) return std::nullopt;
    // Work that does not shrink needs a second, longer prefix (below): 4r, or what the loop has.
    const int64_t r2 = std::min(4 * r, a->of_iterations - 1);
    if (a->has_fixed_work && r2 < 2 * r) return std::nullopt;
    const double whole = p.comp->flops();
    auto measure = [&](const OuterPrefix &x) {
        ++prefix_measurements_;
        return compile_and_measure(p, x.program,
                                   prefix_options(measure_, x.program.comp->flops() / whole), out);
    };
    const Measurement m1 = measure(*a);
    if (!a->has_fixed_work || m1.timed_out) return m1;
    // Work that does not shrink with the prefix (B packed whole before the row loop, an output
    // zeroed at entry): the line through r and 4r iterations, extended to the whole variable.
    // 4r rather than 2r: the slope's noise is then a third of the calls' spread, not all of it.
    const std::optional<OuterPrefix> b = outer_prefix(p, r2);
    if (!b) return m1;
    Measurement m = measure(*b);
    if (m.timed_out) return m;
    const double x1 = double(a->elements), x2 = double(b->elements), e = double(a->extent);
    const double t1 = m1.median_s, t2 = m.median_s;
    // Slower on the longer prefix than the line allows (noise): its rate alone.
    const double t = t2 > t1 ? t2 + (t2 - t1) * (e - x2) / (x2 - x1) : t2 * e / x2;
    m.median_s = t;
    m.median_gflops = whole / (t * 1e9);
    return m;
}

double Environment::measure_again(const Program &p, StepInfo *info) {
    cache_.erase(cache_key(p, prepacked(p)));
    return evaluate(p, info);
}

void Environment::set_measure_options(const MeasureOptions &m) {
    check_measure_options(m);
    measure_ = m;
    custom_measure_ = true;
}

bool Environment::cut_short(const Program &p) const {
    return std::ranges::find(cut_keys_, cache_key(p, prepacked(p))) != cut_keys_.end();
}

void Environment::set_prefix_flops(double target_flops, double max_share) {
    if (!(target_flops >= 0) || !std::isfinite(target_flops))
        throw Error(fmt::format("prefix flops must be finite and >= 0, not {}", target_flops));
    if (!(max_share > 0 && max_share < 1))
        throw Error(fmt::format("a prefix's largest share must be in (0, 1), not {}", max_share));
    prefix_flops_ = target_flops;
    prefix_share_ = max_share;
}

void Environment::reset_measure_options() {
    measure_ = config_.measure;
    custom_measure_ = false;
    prefix_flops_ = 0;
    for (const std::string &key : prefix_keys_) cache_.erase(key);
    prefix_keys_.clear();
    for (const std::string &key : cut_keys_) cache_.erase(key);
    cut_keys_.clear();
}

void Environment::ensure_reference() {
    if (have_reference_) return;
    // (An environment that does not measure makes its buffers here, when it first verifies.)
    if (buffers_.data.empty()) buffers_ = make_buffers(*program_.comp, 1);
    const looptool::ReferenceProgressEnd progress(config_.reference.progress);
    reference_ = compute_reference(*program_.comp, buffers_, config_.reference);
    progress.done();
    have_reference_ = true;
}

Comparison Environment::verify(const Program &p, double tolerance) {
    // A `flatten`ed program has another computation over the same buffers.
    if (!program_.comp || !same_storage(*p.comp, *program_.comp))
        throw Error("verify(): the program is not of the current benchmark");
    check_tolerance(tolerance);
    const Computation &c = *p.comp;
    check_memory(c, buffer_bytes(c) + (have_reference_ ? 0 : reference_bytes(c, config_.reference)),
                 "verification (a copy of its tensors and the reference)", config_.max_memory);
    ensure_reference();
    // NaN in every non-input tensor: an element the kernel fails to write, or a temporary it
    // fails to zero, shows up as a mismatch.
    Buffers got = buffers_;
    fill_non_inputs(*p.comp, got, std::numeric_limits<float>::quiet_NaN());
    if (const std::optional<Prepacked> split = prepacked(p)) {
        add_packed_buffers(*split, got);
        run_prepacked_kernels(*jit_, *split, got);
        drop_packed_buffers(*split, got);
    } else {
        int32_t cancel = 0;
        jit_->compile(p).fn(got.pointers().data(), &cancel);
    }
    ++counters_.verified;
    return compare_outputs(*p.comp, reference_, got, tolerance);
}

StepResult Environment::step(Action a) {
    if (!program_.comp) throw Error("step() before reset()");
    if (space_.index_of(a) < 0)
        throw Error(
            fmt::format("action {} is not in the action space '{}'", action_name(a), space_.name));
    Program next = apply(program_, a);  // throws for an illegal action
    StepResult r;
    const bool moves_only = a == Action::Up || a == Action::Down;
    program_ = std::move(next);
    if (moves_only) {
        r.info.gflops = gflops_;
    } else {
        double g = evaluate(program_, &r.info);
        r.reward = (g - gflops_) / max_gflops_;
        gflops_ = g;
    }
    history_.push_back(a);
    r.info.step = ++steps_;
    r.done = steps_ >= config_.max_steps;
    return r;
}

StepResult Environment::step_index(int i) {
    if (i < 0 || size_t(i) >= space_.size())
        throw Error(fmt::format("action index {} out of range (0..{})", i, space_.size() - 1));
    return step(space_.actions[size_t(i)]);
}

std::vector<bool> Environment::action_mask() const {
    return looptool::action_mask(program_, space_);
}

double Environment::runtime_s() const {
    return gflops_ > 0 ? program_.comp->flops() / (gflops_ * 1e9) : 0;
}

Observation Environment::observe(const std::string &space) const {
    if (!program_.comp) throw Error("observe() before reset()");
    Observation o;
    o.space = space;
    if (space == "runtime") {
        o.scalar = runtime_s();
    } else if (space == "flops") {
        o.scalar = gflops_;
    } else if (space == "ir") {
        o.kind = Observation::Kind::Text;
        o.text = serialize(program_);
    } else if (space == "loop_tree") {
        o.kind = Observation::Kind::Text;
        o.text = dump(program_);
    } else if (space == "loops_tensor") {
        return loops_tensor(program_, config_.max_loops);
    } else if (space == "stride_tensor") {
        return stride_tensor(program_);
    } else if (space == "prev_actions_tensor") {
        return prev_actions_tensor(history_, space_);
    } else if (space == "threads") {
        o.scalar = config_.threads;
    } else if (space == "machine_tensor") {
        return machine_tensor(machine_vector_);
    } else {
        std::string known;
        for (const auto &n : observation_space_names()) known += (known.empty() ? "" : ", ") + n;
        throw Error(fmt::format("unknown observation space '{}' (known: {})", space, known));
    }
    return o;
}

}  // namespace looptune
