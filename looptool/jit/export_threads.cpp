// The runtime an exported parallel kernel calls: C source written beside the kernel
// (looptool_threads.c), compiled by the user with -pthread. A source file rather than code in
// the object: every kernel of a program then shares one pool, and the C compiler, not ours,
// decides how pthreads is linked on the user's system.
#include "looptool/jit/export.h"

namespace looptool {
namespace {

constexpr const char kRuntime[] =
    R"(/* looptool_threads.c: the thread pool of kernels exported by `looptool export --threads N`
 * (N > 1). Compile it once per program, beside the kernels' objects:
 *     cc -O2 -pthread -c looptool_threads.c && cc ... NAME.o looptool_threads.o -pthread
 * A kernel hands each parallel loop to looptool_parallel_for with a pointer to its N: the
 * iterations [0, n) are split into min(N, n) contiguous chunks, the calling thread running the
 * first and N - 1 worker threads the others (a static schedule). The workers are created at the
 * first parallel call and kept for the life of the process (no thread is created per call); they
 * are not pinned. One parallel loop runs at a time: a call made while another runs (from another
 * thread) runs its chunks on its own thread, correct and only slower. If a worker cannot be
 * created, the chunks run on the threads there are. The definitions are weak, so that a program
 * linking two copies of this file gets one pool. */
#include <pthread.h>
#include <stdint.h>

#define LT_MAX_WORKERS 1023

typedef void (*lt_body)(void *ctx, int64_t begin, int64_t end);

static pthread_mutex_t lt_call = PTHREAD_MUTEX_INITIALIZER; /* one parallel loop at a time */
static pthread_mutex_t lt_mu = PTHREAD_MUTEX_INITIALIZER;   /* guards everything below */
static pthread_cond_t lt_job = PTHREAD_COND_INITIALIZER, lt_done = PTHREAD_COND_INITIALIZER;
static int lt_workers;                              /* started so far */
static unsigned long lt_generation;                 /* bumped per parallel loop */
static unsigned long lt_first_seen[LT_MAX_WORKERS]; /* the generation a worker started in */
static lt_body lt_fn;
static void *lt_ctx;
static int64_t lt_n;
static int lt_chunks, lt_left;

static void lt_run_chunk(lt_body fn, void *ctx, int64_t n, int chunks, int i) {
    fn(ctx, i * n / chunks, (i + 1) * n / chunks);
}

static void *lt_worker(void *arg) {
    const int index = (int)(intptr_t)arg; /* its chunk: 1 .. N - 1 */
    pthread_mutex_lock(&lt_mu);
    unsigned long seen = lt_first_seen[index - 1];
    for (;;) {
        while (lt_generation == seen) pthread_cond_wait(&lt_job, &lt_mu);
        seen = lt_generation;
        if (index >= lt_chunks) continue;
        lt_body fn = lt_fn;
        void *ctx = lt_ctx;
        const int64_t n = lt_n;
        const int chunks = lt_chunks;
        pthread_mutex_unlock(&lt_mu);
        lt_run_chunk(fn, ctx, n, chunks, index);
        pthread_mutex_lock(&lt_mu);
        if (--lt_left == 0) pthread_cond_signal(&lt_done);
    }
    return 0;
}

/* Starts workers up to `wanted`; returns how many there are. Called with lt_mu held. */
static int lt_start_workers(int wanted) {
    if (wanted > LT_MAX_WORKERS) wanted = LT_MAX_WORKERS;
    while (lt_workers < wanted) {
        pthread_t t;
        lt_first_seen[lt_workers] = lt_generation;
        if (pthread_create(&t, 0, lt_worker, (void *)(intptr_t)(lt_workers + 1)) != 0) break;
        pthread_detach(t);
        ++lt_workers;
    }
    return lt_workers;
}

__attribute__((weak)) void looptool_parallel_for(const void *pool, lt_body fn, void *ctx,
                                                 int64_t n) {
    const int threads = *(const int *)pool;
    int64_t chunks = threads < n ? threads : n;
    if (chunks < 2 || pthread_mutex_trylock(&lt_call) != 0) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&lt_mu);
    const int workers = lt_start_workers((int)chunks - 1);
    if (chunks > workers + 1) chunks = workers + 1;
    lt_fn = fn;
    lt_ctx = ctx;
    lt_n = n;
    lt_chunks = (int)chunks;
    lt_left = (int)chunks - 1;
    ++lt_generation;
    if (lt_left > 0) pthread_cond_broadcast(&lt_job);
    pthread_mutex_unlock(&lt_mu);
    lt_run_chunk(fn, ctx, n, (int)chunks, 0);
    pthread_mutex_lock(&lt_mu);
    while (lt_left > 0) pthread_cond_wait(&lt_done, &lt_mu);
    pthread_mutex_unlock(&lt_mu);
    pthread_mutex_unlock(&lt_call);
}
)";

}  // namespace

const char *exported_threads_runtime() { return kRuntime; }

}  // namespace looptool
