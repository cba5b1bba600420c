// The thread pool parallel kernels run on (docs/actions.md, `parallel`): one per Jit, its
// workers started on the first parallel call and kept until the Jit goes, each pinned to one of
// the cores the process may use other than the caller's. A call splits [0, n) into one
// contiguous chunk per thread (a static schedule), the calling thread taking the first, and
// returns when every chunk is done. A chunk whose worker has not started it when the caller is
// done with its own is run by the caller: on a loaded machine a descheduled worker then delays
// nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace looptool {

class ThreadPool {
public:
    /// A chunk of a parallel loop: iterations [begin, end).
    using Body = void (*)(void *ctx, int64_t begin, int64_t end);

    /// `threads` counts the caller: threads - 1 workers (none below 2).
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int threads() const { return threads_; }
    /// Each started worker's CPU affinity as the OS holds it (pthread_getaffinity_np): the
    /// cores it may run on. Empty before the first parallel call.
    std::vector<std::vector<int>> worker_cpus();
    /// Runs body over [0, n) in min(threads, n) contiguous chunks. A call made while another
    /// runs (from another thread) runs its chunks on the caller alone: correct, only slower.
    void run(Body body, void *ctx, int64_t n);

private:
    void start();
    void pin_workers(int caller_cpu);
    void worker(int index);
    /// Claims chunk i of job `gen` for the calling thread: false when another thread has it.
    bool claim(int i, uint64_t gen);
    void run_chunk(int i);

    const int threads_;
    std::vector<std::thread> workers_;
    std::once_flag started_;
    std::mutex running_;  // one job at a time
    // The job, written before generation_ is bumped; atomics so that a worker late for a job
    // may read the next one's fields without a data race (its claim then fails).
    std::atomic<Body> body_{nullptr};
    std::atomic<void *> ctx_{nullptr};
    std::atomic<int64_t> n_{0};
    std::atomic<int> chunks_{0};
    std::atomic<uint64_t> generation_{0};
    std::unique_ptr<std::atomic<uint64_t>[]> claimed_;  // per chunk: the last job that took it
    std::atomic<int> done_{0};                          // chunks of the job finished
    std::atomic<bool> stop_{false};
    int pinned_for_ = -2;  // the caller's core the workers were pinned around
    // The cores the constructing thread may use: a caller pinned later, while it measures,
    // must not confine the workers to its own core.
    const std::vector<int> cpus_;
};

}  // namespace looptool

/// The entry the kernels call (lowering: a parallel loop's outlined body): `pool` is the Jit's
/// ThreadPool (the JIT's `looptool_thread_pool` symbol).
extern "C" void looptool_parallel_for(void *pool, looptool::ThreadPool::Body body, void *ctx,
                                      int64_t n);
