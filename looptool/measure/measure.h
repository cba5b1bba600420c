// Honest measurement of a kernel (docs/measurement.md): one thread pinned to one core,
// 64-byte aligned buffers with random inputs, warm-up calls, then repeated calls until both a
// minimum time and a minimum count are reached; median and min GFLOPS and the coefficient of
// variation. A time cap cuts off pathologically slow schedules.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "looptool/check/interpreter.h"
#include "looptool/jit/jit.h"

namespace looptool {

struct MeasureOptions {
    int warmup = 3;            ///< calls before timing
    int min_runs = 10;         ///< timed calls, at least
    double min_time_s = 0.05;  ///< total timed seconds, at least
    int max_runs = 100000;     ///< stop here even if min_time_s is not reached
    double time_cap_s = 2.0;   ///< total budget; past it the kernel is cancelled
    /// The first call may take at most this long (0: no limit): a kernel slower than that is
    /// cancelled there and the measurement ends, its figure an upper bound (timed_out). A search
    /// bounds it by a few calls of its best kernel: one call tells that the state cannot win.
    double first_call_cap_s = 0;
    int pin_core = -1;  ///< core to pin to; -1: the core the thread is on now
};

struct Measurement {
    double median_gflops = 0;
    double max_gflops = 0;  ///< from the fastest call
    double median_s = 0;
    double min_s = 0;
    double cv = 0;  ///< coefficient of variation of the call times
    int runs = 0;
    /// Cut off by the time cap. The figures then come from the calls that completed (timed,
    /// else warm-up; runs counts timed ones only), or, if none did, from the cut call's elapsed
    /// time: a lower bound on its time, so the GFLOPS are an upper bound.
    bool timed_out = false;
};

/// Throws Error naming every field when `o` is not a protocol measure_kernel can follow
/// (negative counts, a NaN minimum time, a cap that is not positive and finite).
void check_measure_options(const MeasureOptions &o);

/// Times `fn` on `buffers` (see KernelFn); FLOPs are c.flops() (2*m*n*k for a matmul). A buffer
/// may be larger than its tensor (a prefix of a kernel runs on the whole kernel's buffers,
/// looptool/measure/prefix.h); a smaller one is an Error.
Measurement measure_kernel(KernelFn fn, const Computation &c, Buffers &buffers,
                           const MeasureOptions &options = {});

/// Longest a measurement for a reference figure may take: one warm-up and three calls.
inline constexpr double kUncutCapS = 300;
/// `o` made to complete a few calls of a slow kernel: one warm-up, three calls, no minimum time,
/// kUncutCapS. measure_kernel_uncut's second try, and compare's judge's.
MeasureOptions uncut_options(MeasureOptions o);
/// measure_kernel, and when a call does not fit the options' cap (its figure would come from
/// warm-ups, or be an upper bound), again with one warm-up and three calls under kUncutCapS:
/// for side-by-side figures of kernels that take seconds a call (LoopTune's batch-64 convs take
/// 3-7 s). Throws Error when even that is cut.
Measurement measure_kernel_uncut(KernelFn fn, const Computation &c, Buffers &buffers,
                                 const MeasureOptions &options = {});

/// Wall-clock seconds since `t0` (steady clock).
double seconds_since(std::chrono::steady_clock::time_point t0);

/// Pins the calling thread to `core` (-1: its current core). Returns the core, or -1 if
/// pinning is not possible here.
int pin_to_core(int core = -1);

/// Another core's work streaming through the L3 all cores share: while it lives, a thread
/// pinned to `core` copies 64 MB buffers. The benchmarks and `compare` run beside one
/// (--neighbour-core) to show what kernels do on a busy machine: those that read a large set
/// again in short runs from the L3 ran up to 2-8x slower, oneDNN 0-14% (docs/decisions.md).
class CacheNeighbour {
public:
    /// Throws Error when no thread can be pinned to `core`, or when it is `measured_core`, the
    /// core the measurements run on (-1: not known).
    explicit CacheNeighbour(int core, int measured_core = -1);
    ~CacheNeighbour();
    CacheNeighbour(const CacheNeighbour &) = delete;
    CacheNeighbour &operator=(const CacheNeighbour &) = delete;
    /// Buffers copied so far (a test sees it work).
    int64_t copies() const { return copies_.load(); }

private:
    std::atomic<bool> stop_{false};
    std::atomic<int64_t> copies_{0};
    std::thread thread_;
};

struct PeakResult {
    double gflops = 0;
    std::string isa;  ///< "avx512", "avx2" or "sse"
};

/// Single-core FP32 peak from independent FMA chains in the widest vector ISA the CPU has.
PeakResult measure_peak_gflops(double seconds = 0.3);

/// The CPU's model string from /proc/cpuinfo, the key of the stored peak.
std::string cpu_model_name();

/// Stores `r` as this CPU model's peak in the cache max_gflops() reads
/// ($XDG_CACHE_HOME/looptune/peak.json, else ~/.cache/looptune/peak.json), written
/// atomically. Returns the file's path.
std::string store_peak(const PeakResult &r);

/// MAX_GFLOPS from the environment if set (as in LoopTune), else the stored peak for this
/// machine (~/.cache/looptune/peak.json, written by `looptool peak`), else measured now and
/// stored.
double max_gflops();

/// The machine's own peak: the stored value, else measured now and stored; MAX_GFLOPS is
/// ignored. Measurements are filed under it, since the override does not change the hardware.
double machine_peak_gflops();

}  // namespace looptool
