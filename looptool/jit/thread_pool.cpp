#include "looptool/jit/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <chrono>

#include "util/threads.h"

namespace looptool {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// How long a thread spins on a flag before it sleeps on it: back-to-back kernel calls (a
// measurement's) find the workers awake, and an idle pool costs no core.
constexpr auto kSpin = std::chrono::microseconds(200);

template <typename T, typename Pred>
void spin_then_wait(const std::atomic<T> &a, Pred done) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0;; ++i) {
        const T v = a.load(std::memory_order_acquire);
        if (done(v)) return;
        if ((i & 255) == 255 && std::chrono::steady_clock::now() > until) {
            a.wait(v, std::memory_order_acquire);
            if (done(a.load(std::memory_order_acquire))) return;
        }
        cpu_relax();
    }
}

}  // namespace

ThreadPool::ThreadPool(int threads)
    : threads_(threads < 1 ? 1 : threads),
      claimed_(std::make_unique<std::atomic<uint64_t>[]>(size_t(threads_))),
      cpus_(looptune::allowed_cpus()) {}

std::vector<std::vector<int>> ThreadPool::worker_cpus() {
    std::lock_guard<std::mutex> lock(running_);  // not while a job re-pins them
    std::vector<std::vector<int>> out;
    for (auto &t : workers_) {
        cpu_set_t set;
        CPU_ZERO(&set);
        std::vector<int> cpus;
        if (pthread_getaffinity_np(t.native_handle(), sizeof(set), &set) == 0)
            for (int c = 0; c < CPU_SETSIZE; ++c)
                if (CPU_ISSET(c, &set)) cpus.push_back(c);
        out.push_back(std::move(cpus));
    }
    return out;
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto &t : workers_) t.join();
}

void ThreadPool::start() {
    for (int i = 1; i < threads_; ++i) {
        workers_.emplace_back([this, i] { worker(i); });
        pthread_setname_np(workers_.back().native_handle(), "looptool-pool");  // top -H, tests
    }
}

// Each worker on its own core, none on the caller's: a worker sharing the caller's core would
// run its chunk only after the caller's. Re-pinned when the caller has moved.
void ThreadPool::pin_workers(int caller_cpu) {
    if (caller_cpu == pinned_for_) return;
    pinned_for_ = caller_cpu;
    std::vector<int> cpus;
    for (int c : cpus_)
        if (c != caller_cpu) cpus.push_back(c);
    if (cpus.empty()) return;
    for (size_t i = 0; i < workers_.size(); ++i) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[i % cpus.size()], &set);
        pthread_setaffinity_np(workers_[i].native_handle(), sizeof(set), &set);
    }
}

// A chunk is claimed by raising its last job to `gen`; once every chunk of a job is done the
// caller starts the next, so a worker late for job `gen` finds its chunk claimed.
bool ThreadPool::claim(int i, uint64_t gen) {
    uint64_t seen = claimed_[size_t(i)].load(std::memory_order_relaxed);
    while (seen < gen)
        if (claimed_[size_t(i)].compare_exchange_weak(seen, gen, std::memory_order_acq_rel))
            return true;
    return false;
}

void ThreadPool::run_chunk(int i) {
    const int64_t n = n_.load(std::memory_order_relaxed);
    const int chunks = chunks_.load(std::memory_order_relaxed);
    body_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), i * n / chunks,
                                          (i + 1) * n / chunks);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_one();
}

void ThreadPool::run(Body body, void *ctx, int64_t n) {
    const int chunks = int(std::min<int64_t>(threads_, n));
    std::unique_lock<std::mutex> lock(running_, std::try_to_lock);
    if (chunks < 2 || !lock.owns_lock()) {
        if (n > 0) body(ctx, 0, n);
        return;
    }
    std::call_once(started_, [this] { start(); });
    pin_workers(sched_getcpu());
    body_.store(body, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    n_.store(n, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    // Chunks past this job's count are taken at once: a worker late for this job then finds
    // every chunk of it claimed.
    const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;
    for (int i = chunks; i < threads_; ++i) claimed_[size_t(i)].store(gen);
    generation_.store(gen, std::memory_order_release);
    generation_.notify_all();
    for (int i = 0; i < chunks; ++i)
        if (claim(i, gen)) run_chunk(i);
    spin_then_wait(done_, [chunks](int v) { return v == chunks; });
}

void ThreadPool::worker(int index) {
    uint64_t seen = 0;
    for (;;) {
        spin_then_wait(generation_, [seen](uint64_t g) { return g != seen; });
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        if (index < chunks_.load(std::memory_order_relaxed) && claim(index, seen)) run_chunk(index);
    }
}

}  // namespace looptool

extern "C" void looptool_parallel_for(void *pool, looptool::ThreadPool::Body body, void *ctx,
                                      int64_t n) {
    static_cast<looptool::ThreadPool *>(pool)->run(body, ctx, n);
}
