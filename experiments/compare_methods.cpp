#include "experiments/compare_methods.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include "baselines/onednn_conv.h"
#include "baselines/onednn_matmul_postops.h"
#include "baselines/onednn_primitive.h"
#include "baselines/onednn_rowop.h"
#include "baselines/reference_kernels.h"
#include "looptool/check/interpreter.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "search/search.h"

namespace looptune {

using namespace looptool;

namespace {

// The conv methods (onednn-conv-plain, -best) run only conv2d benchmarks, the others only matmul.
std::optional<bench::ConvLayout> conv_library(const std::string &method) {
    for (auto l : {bench::ConvLayout::Plain, bench::ConvLayout::Best})
        if (method == bench::conv_method_name(l)) return l;
    return std::nullopt;
}

bool is_matmul(const Computation &c) {
    if (c.tensors.size() != 4 || c.vars.size() != 3) return false;
    return c == make_matmul(c.vars[0].extent, c.vars[2].extent, c.vars[1].extent, c.name);
}

/// One call of a library kernel on fresh buffers, checked against the reference interpreter;
/// then each call of the returned function runs the full measurement protocol on the same
/// buffers (compare's judge calls it once per alternating round).
std::function<double()> library_measurer(const std::string &bench, const std::string &method,
                                         KernelFn fn, const Computation &c) {
    struct State {
        Computation comp;
        Buffers buffers;
        bench::Shape shape;
    };
    auto st = std::make_shared<State>(
        State{c, make_buffers(c, 1), {c.vars[0].extent, c.vars[2].extent, c.vars[1].extent}});
    bench::set_reference_shape(st->shape);
    const Reference want = compute_reference(c, st->buffers);
    int32_t cancel = 0;
    std::vector<float *> ptrs = st->buffers.pointers();
    fn(ptrs.data(), &cancel);
    Comparison cmp = compare_outputs(c, want, st->buffers);
    if (!cmp.ok)
        throw Error(fmt::format("{} {}: the library's result differs from the reference: {}", bench,
                                method, cmp.first_mismatch));
    return [st, fn] {
        bench::set_reference_shape(st->shape);  // the kernels read the shape from there
        return measure_kernel_uncut(fn, st->comp, st->buffers).median_gflops;
    };
}

// The measurer of a library method's kernel on `naive`.
std::function<double()> library_row(const std::string &bench, const std::string &m,
                                    const Program &naive) {
    if (auto layout = conv_library(m))
        return bench::onednn_conv_measurer(bench, *layout, *naive.comp);
    if (bench::is_rowop_method(m)) return bench::rowop_measurer(bench, m, *naive.comp);
    if (m == bench::kOnednnMatmul)
        return bench::onednn_postops_runs_on(*naive.comp)
                   ? bench::onednn_postops_measurer(bench, *naive.comp)
                   : bench::onednn_matmul_measurer(bench, *naive.comp);
    return library_measurer(
        bench, m, m == "openblas" ? bench::openblas_kernel : bench::onednn_kernel, *naive.comp);
}

// The judge's figure for a final schedule. A kernel slower than the protocol's time cap gets no
// complete call in it, and a cut measurement's GFLOPS are only an upper bound (one read above
// the core's peak). Such a kernel is measured again
// with one warm-up and three calls under a cap that fits them (kUncutCapS, as
// measure_kernel_uncut does for the libraries), or the row fails saying how slow it is.
double judged_gflops(Environment &judge, const Program &p, bool *slow = nullptr) {
    StepInfo info;  // measured afresh: the cache may hold a cut figure of it
    double g = judge.measure_again(p, &info);
    if (slow) *slow = info.timed_out;
    if (!info.timed_out) return g;
    judge.set_measure_options(uncut_options(judge.measure_options()));
    g = judge.measure_again(p, &info);
    judge.reset_measure_options();
    if (info.timed_out)
        throw Error(
            fmt::format("the final schedule takes over {:.0f} s a call (at most {:.3g} "
                        "GFLOPS): not measured",
                        kUncutCapS / 4, g));
    return g;
}

// Tunes `row.method` from the naive nest in a fresh environment (fresh caches: no method
// profits from another's work); fills the row's tuning time and schedule count.
std::vector<Action> tune(const CompareConfig &c, const Program &naive, CompareRow &row) {
    const std::string m = unprepacked(row.method);
    Environment env(method_environment(c, row.method));
    env.reset(naive);
    if (auto it = c.extra_methods.find(m); it != c.extra_methods.end()) {
        auto t = std::chrono::steady_clock::now();
        std::vector<Action> actions = it->second.run(env, naive);
        row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
        row.schedules = env.counters().compiles + env.counters().store_hits;
        return actions;
    }
    SearchConfig sc;
    sc.budget_s = c.budget_s;
    sc.max_steps = method_steps(c, m);
    sc.seed = c.seed;
    SearchResult r = run_search(m, env, naive, sc);
    row.seconds = r.seconds;
    row.schedules = r.schedules_measured;
    return r.actions;
}

}  // namespace

bool is_prepacked(const std::string &method) { return method.ends_with(kPrepackedSuffix); }

std::string unprepacked(const std::string &method) {
    return is_prepacked(method) ? method.substr(0, method.size() - strlen(kPrepackedSuffix))
                                : method;
}

bool is_library(const std::string &method) {
    return method == "openblas" || method == "onednn" || method == bench::kOnednnMatmul ||
           conv_library(method) || bench::is_rowop_method(method);
}

bool runs_on(const std::string &method, const Computation &c) {
    if (!is_library(method)) return true;
    if (bench::is_rowop_method(method)) return bench::rowop_method_runs_on(method, c);
    if (method == bench::kOnednnMatmul)
        return bench::strided_matmul(c).has_value() || bench::onednn_postops_runs_on(c);
    return conv_library(method) ? bench::is_conv2d(c) : is_matmul(c);
}

EnvConfig method_environment(const CompareConfig &c, const std::string &named) {
    const std::string method = unprepacked(named);
    EnvConfig cfg;
    cfg.action_space = c.space;
    cfg.store_path = c.store_path;
    cfg.max_memory = c.max_memory;
    cfg.threads = c.threads;
    cfg.max_steps = c.max_steps > 0 ? c.max_steps : kLoopTuneSteps;
    if (auto it = c.extra_methods.find(method); it != c.extra_methods.end()) {
        if (it->second.environment) cfg = it->second.environment(cfg);
    } else if (c.max_steps == 0 && method != "base" && !is_library(method)) {
        cfg.max_steps = default_steps(method);
    }
    if (is_prepacked(named)) cfg.constant_inputs = c.constant_inputs;
    return cfg;
}

int method_steps(const CompareConfig &c, const std::string &method) {
    if (method == "base" || is_library(method)) return 0;
    return method_environment(c, method).max_steps;
}

std::function<double()> measure_row(const CompareConfig &c, Environment &judge,
                                    const Program &naive, CompareRow &row) {
    const std::string &m = row.method;
    // The judge measures a prepacked method's schedules as it tuned them.
    const std::vector<std::string> constant =
        is_prepacked(m) ? c.constant_inputs : std::vector<std::string>{};
    judge.set_constant_inputs(constant);
    if (is_library(m)) {
        std::function<double()> again = library_row(row.benchmark, m, naive);
        row.gflops = again();
        return again;
    }
    const std::vector<Action> actions = m == "base" ? std::vector<Action>{} : tune(c, naive, row);
    // Each state on the way (unless final_only), then the final one, uncut.
    Program p = naive;
    for (Action a : actions) {
        if (!c.final_only) row.step_gflops.push_back(judge.evaluate(p));
        p = apply(p, a);
        row.actions += (row.actions.empty() ? "" : " ") + std::string(action_name(a));
    }
    bool slow = false;
    row.step_gflops.push_back(judged_gflops(judge, p, &slow));
    Comparison cmp = judge.verify(p);
    if (!cmp.ok)
        throw Error(fmt::format("the final schedule failed verification ({} of {}): {}",
                                cmp.mismatches, cmp.coverage(), cmp.first_mismatch));
    row.gflops = row.step_gflops.back();
    if (m == "base" || slow) return {};
    return [&judge, p, constant] {
        judge.set_constant_inputs(constant);
        return judged_gflops(judge, p);
    };
}

}  // namespace looptune
