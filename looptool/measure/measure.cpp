// The measurement protocol of docs/measurement.md: pin, warm up, time single calls until both a
// minimum count and a minimum time are reached, report median/min and the spread. A watchdog
// thread raises the kernel's cancel flag at the time cap so the caller never hangs.
#include "looptool/measure/measure.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "looptool/ir/error.h"
#include "util/stats.h"

namespace looptool {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

namespace {

using Clock = std::chrono::steady_clock;

/// Sleeps until `deadline` or until stopped; at the deadline it raises `*flag`. The flag is
/// written with an atomic store because the kernel reads it through a volatile pointer from
/// another thread.
class Watchdog {
public:
    Watchdog(int32_t *flag, Clock::time_point deadline) : flag_(flag), deadline_(deadline) {
        thread_ = std::thread([this] {
            std::unique_lock<std::mutex> lock(mu_);
            while (!stop_) {
                const Clock::time_point d = deadline_;
                if (cv_.wait_until(lock, d) == std::cv_status::timeout && deadline_ == d &&
                    !stop_) {
                    __atomic_store_n(flag_, 1, __ATOMIC_SEQ_CST);
                    return;
                }
            }
        });
    }
    /// Moves the deadline (before it has passed).
    void set_deadline(Clock::time_point deadline) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            deadline_ = deadline;
        }
        cv_.notify_one();
    }
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_one();
        thread_.join();
    }
    Watchdog(const Watchdog &) = delete;
    Watchdog &operator=(const Watchdog &) = delete;

private:
    int32_t *flag_;
    Clock::time_point deadline_;  // guarded by mu_
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

/// Restores the thread's CPU mask on scope exit, so measuring does not leave the caller pinned.
class AffinityGuard {
public:
    AffinityGuard() { saved_ = sched_getaffinity(0, sizeof(mask_), &mask_) == 0; }
    ~AffinityGuard() {
        if (saved_) sched_setaffinity(0, sizeof(mask_), &mask_);
    }
    AffinityGuard(const AffinityGuard &) = delete;
    AffinityGuard &operator=(const AffinityGuard &) = delete;

private:
    cpu_set_t mask_{};
    bool saved_ = false;
};

void summarize(const std::vector<double> &times, double flops, Measurement &m) {
    m.runs = int(times.size());
    m.median_s = looptune::median(times);
    m.min_s = *std::min_element(times.begin(), times.end());
    double mean = 0;
    for (double t : times) mean += t;
    mean /= double(times.size());
    double var = 0;
    for (double t : times) var += (t - mean) * (t - mean);
    var = times.size() > 1 ? var / double(times.size() - 1) : 0.0;
    m.cv = mean > 0 ? std::sqrt(var) / mean : 0.0;
    m.median_gflops = m.median_s > 0 ? flops / m.median_s * 1e-9 : 0.0;
    m.max_gflops = m.min_s > 0 ? flops / m.min_s * 1e-9 : 0.0;
}

/// The figures of a measurement from its timed calls or, without any, its warm-up calls; with
/// neither, from how long the call the watchdog cut (`cut_call_s`) or the whole measurement ran.
void summarize_calls(const std::vector<double> &timed, const std::vector<double> &warm,
                     double cut_call_s, Clock::time_point start, double flops, Measurement &m) {
    if (!timed.empty()) {
        summarize(timed, flops, m);
    } else if (!warm.empty()) {
        // Only warm-up calls completed: they are the best figures there are.
        summarize(warm, flops, m);
        m.runs = 0;
    } else {
        // Not even one call completed: the cut call ran at least this long, so the times are
        // lower bounds and the GFLOPS upper bounds.
        const double t = std::max(cut_call_s, seconds_since(start));
        m.median_s = m.min_s = t;
        m.median_gflops = m.max_gflops = flops / t * 1e-9;
        m.cv = 0;
        m.runs = 0;
    }
}

void check_buffers(const Computation &c, const Buffers &buffers) {
    if (buffers.data.size() != c.num_buffers())
        throw Error(fmt::format("measure_kernel: {} buffers for {} tensors of {}",
                                buffers.data.size(), c.num_buffers(), c.name));
    for (size_t t = 0; t < c.num_buffers(); ++t)
        if (int64_t(buffers.data[t].size()) < c.tensors[t].num_elements())
            throw Error(fmt::format("measure_kernel: buffer {} of {} has {} elements, want {}",
                                    c.tensors[t].name, c.name, buffers.data[t].size(),
                                    c.tensors[t].num_elements()));
}

}  // namespace

void check_measure_options(const MeasureOptions &o) {
    if (o.warmup < 0 || o.min_runs < 1 || o.max_runs < o.min_runs || !(o.min_time_s >= 0) ||
        !(o.time_cap_s > 0) || !std::isfinite(o.time_cap_s) || !(o.first_call_cap_s >= 0) ||
        !std::isfinite(o.first_call_cap_s))
        throw Error(fmt::format(
            "bad measurement options: warmup {} (>= 0), min_runs {} (>= 1), max_runs {} "
            "(>= min_runs), min_time_s {} (>= 0), time_cap_s {} (> 0, finite), "
            "first_call_cap_s {} (>= 0, finite)",
            o.warmup, o.min_runs, o.max_runs, o.min_time_s, o.time_cap_s, o.first_call_cap_s));
}

int pin_to_core(int core) {
    if (core < 0) core = sched_getcpu();
    if (core < 0 || core >= CPU_SETSIZE) return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) return -1;
    return core;
}

CacheNeighbour::CacheNeighbour(int core, int measured_core) {
    if (core < 0) throw Error(fmt::format("neighbour core {}: not a core", core));
    if (core == measured_core)
        throw Error(
            fmt::format("neighbour core {}: the measurements run on it; give another core", core));
    std::promise<int> pinned;
    std::future<int> where = pinned.get_future();
    thread_ = std::thread([this, core, &pinned] {
        const int at = pin_to_core(core);
        pinned.set_value(at);
        if (at < 0) return;
        // Twice the L3 of the largest desktop and server parts we run on (32 MB per CCD).
        std::vector<char> from(size_t(64) << 20, 1), to(from.size());
        while (!stop_.load(std::memory_order_relaxed)) {
            std::memcpy(to.data(), from.data(), from.size());
            copies_.fetch_add(1, std::memory_order_relaxed);
        }
    });
    if (where.get() < 0) {
        thread_.join();
        throw Error(fmt::format("neighbour core {}: no thread can be pinned there", core));
    }
}

CacheNeighbour::~CacheNeighbour() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
}

Measurement measure_kernel(KernelFn fn, const Computation &c, Buffers &buffers,
                           const MeasureOptions &o) {
    if (!fn) throw Error("measure_kernel: no kernel");
    check_measure_options(o);
    check_buffers(c, buffers);

    // Pin for the duration of the measurement only: the OS must not migrate the thread between
    // calls (cold caches, another core's frequency), but the caller keeps its own mask.
    AffinityGuard restore_affinity;
    pin_to_core(o.pin_core);

    std::vector<float *> ptrs = buffers.pointers();
    const double flops = c.flops();
    alignas(64) int32_t cancel = 0;
    auto cancelled = [&] { return __atomic_load_n(&cancel, __ATOMIC_SEQ_CST) != 0; };

    const Clock::time_point start = Clock::now();
    auto after = [&](double s) {
        return start +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    };
    const bool first_capped = o.first_call_cap_s > 0 && o.first_call_cap_s < o.time_cap_s;
    Watchdog watchdog(&cancel, after(first_capped ? o.first_call_cap_s : o.time_cap_s));

    Measurement m;
    std::vector<double> warm, timed;
    timed.reserve(size_t(std::min(o.max_runs, 4096)));
    double cut_call_s = 0;  // duration of a call the watchdog cut short
    double timed_total = 0;
    // The slowest call of each kind so far, kept as calls come (a scan of the times before every
    // call would make a fast kernel's measurement quadratic in its number of calls).
    double slowest_warm = 0, slowest_timed = 0;

    auto call = [&](std::vector<double> &into) {
        Clock::time_point t0 = Clock::now();
        fn(ptrs.data(), &cancel);
        double dt = seconds_since(t0);
        // A call that saw the cancel flag may have returned early: its time is no measurement.
        if (cancelled()) {
            cut_call_s = dt;
            m.timed_out = true;
            return false;
        }
        into.push_back(dt);
        double &slowest = &into == &warm ? slowest_warm : slowest_timed;
        slowest = std::max(slowest, dt);
        if (first_capped && warm.size() + timed.size() == 1)
            watchdog.set_deadline(after(o.time_cap_s));
        return true;
    };
    // Would the next call (judged by the slowest seen so far) run past the cap? Then stop
    // before starting it rather than waste the remaining budget on a call that gets cut.
    auto next_call_fits = [&](double slowest) {
        return seconds_since(start) + slowest <= o.time_cap_s;
    };

    for (int i = 0; i < o.warmup && !m.timed_out; ++i) {
        if (!next_call_fits(slowest_warm)) {
            m.timed_out = true;
            break;
        }
        call(warm);
    }
    while (!m.timed_out && int(timed.size()) < o.max_runs &&
           !(int(timed.size()) >= o.min_runs && timed_total >= o.min_time_s)) {
        if (!next_call_fits(timed.empty() ? slowest_warm : slowest_timed)) {
            m.timed_out = true;
            break;
        }
        if (call(timed)) timed_total += timed.back();
    }

    summarize_calls(timed, warm, cut_call_s, start, flops, m);
    return m;
}

MeasureOptions uncut_options(MeasureOptions o) {
    o.warmup = 1;
    o.min_runs = 3;
    o.min_time_s = 0;
    o.time_cap_s = kUncutCapS;
    return o;
}

Measurement measure_kernel_uncut(KernelFn fn, const Computation &c, Buffers &buffers,
                                 const MeasureOptions &options) {
    Measurement m = measure_kernel(fn, c, buffers, options);
    if (!m.timed_out) return m;
    m = measure_kernel(fn, c, buffers, uncut_options(options));
    if (m.timed_out)
        throw Error(
            fmt::format("{}: a call takes over {:.0f} s (at most {:.3g} GFLOPS): not "
                        "measured",
                        c.name, kUncutCapS / 4, m.median_gflops));
    return m;
}

}  // namespace looptool
