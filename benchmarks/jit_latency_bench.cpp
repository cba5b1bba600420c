// JIT latencies on a 256^3 matmul (docs/decisions.md), with Google Benchmark:
//   compile/naive, compile/tiled: one compile per repetition (the median over repetitions is
//     the figure; each program gets a fresh computation name so the kernel cache misses);
//   cached_lookup: Jit::compile of a schedule already compiled (schedule_key + cache hit);
//   measured_action/...: one environment-style step on a cache miss: apply an action, compile
//     the new schedule, measure it with the environment's short protocol;
//   compile_conv/<seed>: each of `tune`'s conv seeds (its conv tiles) on ResNet's 64-channel 3x3
//     layer over 56x56 (datasets/conv_layers), the schedules a 10 ms target is about;
//     one Jit for all, as in a tuning process;
//   compile_conv_first_in_jit/<seed>: the packed seeds compiled by a fresh Jit each time, which
//     also compiles the runtime (lower_runtime.h: the weight transpose), once per Jit.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>

#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"
#include "search/tile_schedules.h"
#include "tune/guided_search.h"

using namespace looptool;

namespace {

// Timed by hand around exactly the step (UseManualTime): Pause/ResumeTiming cost more than
// they hide at these durations.
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

Jit &jit() {
    static std::unique_ptr<Jit> j = Jit::create();
    return *j;
}

/// A 256^3 matmul with a name never used before, so its kernel is not in the cache.
ComputationPtr fresh_matmul() {
    static std::atomic<int> counter{0};
    return std::make_shared<const Computation>(
        make_matmul(256, 256, 256, fmt::format("mm256_256_256_u{}", counter++)));
}

Program tiled(ComputationPtr c, size_t drop_last = 0) {
    Program p = Program::naive(c);
    auto actions = looptune::tile_actions(*c, looptune::TileSchedule{});
    actions.resize(actions.size() - drop_last);
    for (Action a : actions) p = apply(p, a);
    return p;
}

/// Checks the kernel once against the reference before it is timed.
void verify_or_skip(benchmark::State &state, const Program &p, KernelFn fn) {
    Buffers got = make_buffers(*p.comp, 1);
    const Reference want = compute_reference(*p.comp, got);
    int32_t cancel = 0;
    fn(got.pointers().data(), &cancel);
    Comparison cmp = compare_outputs(*p.comp, want, got);
    if (!cmp.ok) state.SkipWithError(("wrong result: " + cmp.first_mismatch).c_str());
}

void BM_Compile(benchmark::State &state, bool tile) {
    pin_to_core();
    static bool verified_once[2] = {false, false};  // once per benchmark, not per repetition
    bool &verified = verified_once[tile];
    double llvm_ms = 0;
    for (auto _ : state) {
        Program p = tile ? tiled(fresh_matmul()) : Program::naive(fresh_matmul());
        auto t0 = Clock::now();
        Kernel k = jit().compile(p);
        state.SetIterationTime(seconds_since(t0));
        llvm_ms += k.compile_ms;
        if (!verified) verify_or_skip(state, p, k.fn), verified = true;
    }
    state.counters["jit_reported_ms"] = llvm_ms / double(state.iterations());
}

void BM_CachedLookup(benchmark::State &state) {
    pin_to_core();
    Program p = tiled(fresh_matmul());
    jit().compile(p);
    for (auto _ : state) benchmark::DoNotOptimize(jit().compile(p).fn);
}

/// From `start` (cursor included), `action` leads to a schedule never compiled before.
void BM_MeasuredAction(benchmark::State &state, bool tile) {
    pin_to_core();
    // The environment's short protocol (env/environment.h).
    MeasureOptions o{.warmup = 2,
                     .min_runs = 5,
                     .min_time_s = 0.01,
                     .max_runs = 1000,
                     .time_cap_s = 1.0,
                     .pin_core = -1};
    static bool verified_once[2] = {false, false};  // once per benchmark, not per repetition
    bool &verified = verified_once[tile];
    for (auto _ : state) {
        ComputationPtr c = fresh_matmul();
        // tiled: the hand schedule's last step (vectorize the write nest); naive: split_8 of m.
        Program start = tile ? tiled(c, 1) : Program::naive(c);
        Action a =
            tile ? looptune::tile_actions(*c, looptune::TileSchedule{}).back() : Action::Split8;
        Buffers buf = make_buffers(*c, 1);
        auto t0 = Clock::now();
        Program next = apply(start, a);
        Kernel k = jit().compile(next);
        Measurement m = measure_kernel(k.fn, *c, buf, o);
        state.SetIterationTime(seconds_since(t0));
        state.counters["gflops"] = m.median_gflops;
        state.counters["compile_ms"] = k.compile_ms;
        if (!verified) verify_or_skip(state, next, k.fn), verified = true;
    }
}

/// The conv layer with a name never used before.
ComputationPtr fresh_conv() {
    static std::atomic<int> counter{0};
    return std::make_shared<const Computation>(make_conv2d(
        1, 64, 58, 58, 64, 3, 3, fmt::format("conv1_64_58_58__64_64_3_3_u{}", counter++)));
}

void BM_CompileConv(benchmark::State &state, size_t seed, bool fresh_jit) {
    pin_to_core();
    static std::set<size_t> verified_seeds;  // once per seed, not per repetition
    for (auto _ : state) {
        ComputationPtr c = fresh_conv();
        const auto seeds =
            looptune::tune_seeds(*c, looptune::kSeedSteps, ActionSpace::preset("layout"));
        Program p = Program::naive(c);
        for (Action a : seeds.at(seed).actions) p = apply(p, a);
        std::unique_ptr<Jit> own = fresh_jit ? Jit::create() : nullptr;
        auto t0 = Clock::now();
        Kernel k = (own ? *own : jit()).compile(p);
        state.SetIterationTime(seconds_since(t0));
        if (verified_seeds.insert(seed).second) verify_or_skip(state, p, k.fn);
    }
}

}  // namespace

BENCHMARK_CAPTURE(BM_Compile, naive_256, false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(21)
    ->UseManualTime()
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_Compile, tiled_8x32_256, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(21)
    ->UseManualTime()
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_CachedLookup)
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_MeasuredAction, naive_split8_256, false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(21)
    ->UseManualTime()
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_MeasuredAction, tiled_last_step_256, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(21)
    ->UseManualTime()
    ->ReportAggregatesOnly(true);

int main(int argc, char **argv) {
    // One benchmark per conv seed, named after it ("compile_conv/tile 64x4 mh vm pack").
    const ComputationPtr c = fresh_conv();
    const auto seeds =
        looptune::tune_seeds(*c, looptune::kSeedSteps, ActionSpace::preset("layout"));
    for (bool fresh_jit : {false, true})
        for (size_t i = 0; i < seeds.size(); ++i) {
            if (fresh_jit && seeds[i].name.find("pack") == std::string::npos) continue;
            const std::string name =
                (fresh_jit ? "compile_conv_first_in_jit/" : "compile_conv/") + seeds[i].name;
            benchmark::RegisterBenchmark(name.c_str(), BM_CompileConv, i, fresh_jit)
                ->Unit(benchmark::kMillisecond)
                ->Iterations(1)
                ->Repetitions(15)
                ->UseManualTime()
                ->ReportAggregatesOnly(true);
        }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
