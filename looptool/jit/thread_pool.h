// The thread pool parallel kernels run on (docs/actions.md, `parallel`): one per Jit, its
// workers started on the first parallel call and kept until the Jit goes, each pinned to one of
// the cores the process may use other than the caller's. A call splits [0, n) into one
// contiguous chunk per thread (a static schedule), the calling thread taking the first, and
// returns when every chunk is done.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace looptool {

/// The cores the calling process may run on (sched_getaffinity), at least 1.
int usable_cores();

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
    /// Runs body over [0, n) in min(threads, n) contiguous chunks. A call made while another
    /// runs (from another thread) runs its chunks on the caller alone: correct, only slower.
    void run(Body body, void *ctx, int64_t n);

private:
    struct Job {
        Body body = nullptr;
        void *ctx = nullptr;
        int64_t n = 0;
        int chunks = 0;
    };
    void start();
    void pin_workers(int caller_cpu);
    void worker(int index);

    const int threads_;
    std::vector<std::thread> workers_;
    std::once_flag started_;
    std::mutex running_;  // one job at a time
    Job job_;             // written before generation_ is bumped, read after
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};  // workers yet to finish the job
    std::atomic<bool> stop_{false};
    int pinned_for_ = -2;  // the caller's core the workers were pinned around
};

}  // namespace looptool

/// The entry the kernels call (lowering: a parallel loop's outlined body): `pool` is the Jit's
/// ThreadPool (the JIT's `looptool_thread_pool` symbol).
extern "C" void looptool_parallel_for(void *pool, looptool::ThreadPool::Body body, void *ctx,
                                      int64_t n);
