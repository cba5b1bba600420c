// A kernel library (`looptool lib build`) against the JIT, kernel by kernel: for each matmul or
// conv2d of the machine's schedule library, the .so's lt_sgemm / lt_sconv2d (dlopen, called
// from C on 64-byte aligned buffers, or with --offset B on copies starting B bytes past a 64-byte
// boundary, as numpy's 16-byte aligned arrays do: exactly the shape's tuned kernel behind the
// dispatch) and the JIT's kernel of the same schedule, side by side in one process. Both are
// checked against the reference interpreter first; then timed in pairs of calls back to back, the
// order flipping every pair; GFLOPS are medians over the calls, the ratio the median of the pairs'
// ratios (a core shared with other work slows both calls of a pair alike). Target: .so >= 0.97x.
//   taskset -c 1 build/benchmarks/lib_bench --store S --lib DIR   (experiments/lib_speed.sh)
#include <fmt/format.h>

#include <dlfcn.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string_view>

#include "env/store/measurement_store.h"
#include "env/store/schedule_library.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"
#include "util/stats.h"

using namespace looptool;

namespace {

using SgemmFn = int (*)(int64_t, int64_t, int64_t, const float *, const float *, float *);
using ConvFn = int (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const float *,
                       const float *, float *);

struct Timing {
    double jit_gflops = 0, lib_gflops = 0;
    double ratio = 0;  ///< median over the pairs of (JIT time / .so time)
};

/// Pairs of calls, one of each side back to back (the order flips every pair), so both see the
/// same load from the other core; at least `pairs` of them and `seconds` in all, after two
/// warm-up pairs.
/// The calling thread's CPU time in seconds: on a core shared with other processes, time spent
/// preempted counts in wall time (a whole time slice inside a millisecond call), not here.
double thread_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

Timing side_by_side(const Computation &c, const std::function<void()> &jit,
                    const std::function<void()> &lib, int pairs, double seconds, bool cpu_time) {
    std::vector<double> tj, tl, ratios;
    auto once = [cpu_time](const std::function<void()> &f) {
        if (cpu_time) {
            const double t0 = thread_seconds();
            f();
            return thread_seconds() - t0;
        }
        const auto t0 = std::chrono::steady_clock::now();
        f();
        return seconds_since(t0);
    };
    for (int i = 0; i < 2; ++i) jit(), lib();
    const auto start = std::chrono::steady_clock::now();
    for (int p = 0; p < pairs || seconds_since(start) < seconds; ++p) {
        double j, l;
        if (p % 2 == 0)
            j = once(jit), l = once(lib);
        else
            l = once(lib), j = once(jit);
        tj.push_back(j);
        tl.push_back(l);
        ratios.push_back(j / l);
    }
    return {c.flops() / looptune::median(tj) / 1e9, c.flops() / looptune::median(tl) / 1e9,
            looptune::median(ratios)};
}

/// Copies of the .so's tensors starting `offset` bytes past a 64-byte boundary (none for 0).
struct Shifted {
    std::vector<std::vector<float>> storage;
    std::vector<float *> ptrs;
    Shifted(const Computation &c, const std::vector<float *> &io, int offset) {
        ptrs = io;
        if (offset == 0) return;
        size_t i = 0;
        for (TensorKind kind : {TensorKind::Input, TensorKind::Output})
            for (const Tensor &t : c.tensors) {
                if (t.kind != kind) continue;
                const size_t n = size_t(t.num_elements());
                std::vector<float> &v = storage.emplace_back(n + 32);
                const size_t skip = (64 - reinterpret_cast<uintptr_t>(v.data()) % 64) % 64 / 4;
                ptrs[i] = v.data() + skip + size_t(offset) / 4;
                std::copy(io[i], io[i] + n, ptrs[i]);
                ++i;
            }
    }
};

struct Library {
    SgemmFn sgemm;
    ConvFn conv;
};

/// One entry's kernels: both checked against the reference, then timed side by side.
Timing bench_entry(Jit &jit, const Library &so, const looptune::LibraryEntry &e, int offset,
                   int pairs, double seconds, bool cpu_time) {
    const Program p = parse_program(e.program, e.name);
    const Computation &c = p.computation();
    Buffers b = make_buffers(c, 1);
    const Reference want = compute_reference(c, b);
    std::vector<float *> ptrs = b.pointers(), io;
    size_t nc = 0;  // the output's elements
    for (TensorKind kind : {TensorKind::Input, TensorKind::Output})
        for (size_t t = 0; t < c.tensors.size(); ++t)
            if (c.tensors[t].kind == kind) {
                io.push_back(ptrs[t]);
                nc = size_t(c.tensors[t].num_elements());
            }
    Shifted sh(c, io, offset);
    const KernelFn jfn = jit.compile(p).fn;
    const auto &s = e.shape;
    const float *A = sh.ptrs[0], *B = sh.ptrs[1];
    float *C = sh.ptrs[2];
    auto call_lib = [&] {
        const int rc = e.kind == "matmul"
                           ? so.sgemm(s[0], s[1], s[2], A, B, C)
                           : so.conv(s[0], s[1], s[2], s[3], s[4], s[5], s[6], A, B, C);
        if (rc != 0) throw Error(fmt::format("{}: the library returned {}", e.name, rc));
    };
    auto call_jit = [&] { jfn(ptrs.data(), nullptr); };
    for (auto &[side, call] :
         {std::pair<const char *, std::function<void()>>{"JIT", call_jit}, {".so", call_lib}}) {
        fill_non_inputs(c, b, std::nanf(""));
        std::fill(C, C + nc, std::nanf(""));
        call();
        // The JIT writes the original output; the .so the shifted copy, checked through it.
        if (C != io[2] && std::string_view(side) == ".so") std::copy(C, C + nc, io[2]);
        const Comparison r = compare_outputs(c, want, b);
        if (!r.ok)
            throw Error(fmt::format("{} {}: wrong result: {}", e.name, side, r.first_mismatch));
    }
    return side_by_side(c, call_jit, call_lib, pairs, seconds, cpu_time);
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"A kernel library's kernels (lt_sgemm, lt_sconv2d) vs the JIT, same schedules"};
    std::string store, dir, machine, only;
    int pairs = 21, offset = 0;
    bool cpu_time = false;
    double seconds = 0.3;
    app.add_option("--store", store, "Store whose schedule library the library was built from")
        ->required();
    app.add_option("--lib", dir, "Directory `lib build --out` wrote")->required();
    app.add_option("--machine", machine, "Machine fingerprint (default: this machine's)");
    app.add_option("--only", only, "Comma-separated kernel names to time (default: all)");
    app.add_option("--pairs", pairs, "Timed pairs of calls per kernel, at least")
        ->capture_default_str();
    app.add_option("--seconds", seconds, "Seconds of timed pairs per kernel, at least")
        ->capture_default_str();
    app.add_option("--offset", offset,
                   "Bytes past a 64-byte boundary the .so's tensors start at (copies)")
        ->check(CLI::IsMember({0, 4, 8, 16, 32}))
        ->capture_default_str();
    app.add_flag("--cpu-time", cpu_time,
                 "Time calls in the thread's CPU time, not wall time (a loaded machine)");
    CLI11_PARSE(app, argc, argv);
    try {
        if (machine.empty()) machine = looptune::machine_fingerprint(machine_peak_gflops());
        const auto entries = looptune::ScheduleLibrary::open_read_only(store)->entries(machine);
        const std::string path = dir + "/liblooptune_kernels.so";
        void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) throw Error(fmt::format("dlopen {}: {}", path, dlerror()));
        const Library so{reinterpret_cast<SgemmFn>(dlsym(lib, "lt_sgemm")),
                         reinterpret_cast<ConvFn>(dlsym(lib, "lt_sconv2d"))};
        auto jit = Jit::create();
        fmt::print("{:<26} {:>9} {:>9} {:>7}\n", "kernel", "JIT GF/s", ".so GF/s", "ratio");
        std::vector<double> ratios;
        int below = 0;
        for (const auto &e : entries) {
            if (e.kind != "matmul" && e.kind != "conv2d") continue;
            if (!only.empty() && ("," + only + ",").find("," + e.name + ",") == std::string::npos)
                continue;
            const Timing t = bench_entry(*jit, so, e, offset, pairs, seconds, cpu_time);
            const double ratio = t.ratio;
            ratios.push_back(ratio);
            below += ratio < 0.97;
            fmt::print("{:<26} {:>9.1f} {:>9.1f} {:>6.3f}x\n", e.name, t.jit_gflops, t.lib_gflops,
                       ratio);
            std::fflush(stdout);
        }
        if (ratios.empty()) throw Error("no matmul or conv2d kernel in the library");
        fmt::print("{} kernels: .so/JIT geomean {:.3f}x, min {:.3f}x, {} below 0.97x\n",
                   ratios.size(), looptune::geomean(ratios),
                   *std::min_element(ratios.begin(), ratios.end()), below);
        dlclose(lib);
    } catch (const std::exception &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
    return 0;
}
