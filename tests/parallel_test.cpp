// The `parallel` action (docs/actions.md) and the kernels that run a parallel loop on the
// Jit's thread pool: legal and illegal cases, the text format, and every kernel checked
// against the reference with 1, 2 and 3 threads.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"
#include "looptool/jit/thread_pool.h"
#include "looptool/lower/lower.h"
#include "search/seeds.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;
using looptool::tests::matches_reference;

namespace {

Program naive(Computation c) { return Program::naive(std::make_shared<Computation>(std::move(c))); }

Program apply_all(Program p, const std::string &actions) {
    for (Action a : parse_action_list(actions)) p = apply(p, a);
    return p;
}

/// p with the outermost loop of nest `nest` made parallel.
Program parallel_at(Program p, int nest) {
    p.cursor = p.tree.flat({nest, 0});
    return apply(p, Action::Parallel);
}

const char *why(Program p, int flat) {
    p.cursor = flat;
    return why_illegal(p, Action::Parallel);
}

Jit &jit_with(int threads) {
    static std::unique_ptr<Jit> jits[4];
    if (!jits[threads]) {
        JitOptions o;
        o.threads = threads;
        jits[threads] = Jit::create(o);
    }
    return *jits[threads];
}

// Each program, with its parallel marks, against the reference on 1, 2 and 3 threads.
void expect_matches_on_every_thread_count(const Program &p) {
    for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(fmt::format("{} threads", threads));
        EXPECT_TRUE(matches_reference(jit_with(threads), p));
    }
}

}  // namespace

TEST(Parallel, IsOutsideThePolicysSpaces) {
    EXPECT_EQ(ActionSpace::preset("full").index_of(Action::Parallel), -1);
    EXPECT_EQ(ActionSpace::preset("looptune").index_of(Action::Parallel), -1);
    EXPECT_EQ(ActionSpace::preset("layout").index_of(Action::Parallel), -1);
    const ActionSpace threads = ActionSpace::preset("threads");
    EXPECT_EQ(threads.size(), all_actions().size() - 1);  // all but fuse
    EXPECT_GE(threads.index_of(Action::Parallel), 0);
}

TEST(Parallel, LegalOnAnOutermostLoopThatIndexesEveryWrittenTensor) {
    const Program mm = tests::matmul_program(8, 16, 4);  // nests m k n; m n
    EXPECT_EQ(why(mm, 0), nullptr);
    EXPECT_STREQ(why(mm, 1), "only the outermost loop of a nest can be parallel");
    EXPECT_EQ(why(mm, 3), nullptr);  // the write nest
    // k outermost: a reduction over the parallel variable would race.
    const Program k_out = apply_all(mm, "down, swap_up");
    EXPECT_NE(std::string(why(k_out, 0)).find("reduction over it would race"), std::string::npos)
        << why(k_out, 0);
    // A loop of one iteration has nothing to share.
    EXPECT_STREQ(why(tests::matmul_program(1, 16, 4), 0), "the loop has a single iteration");
    const Program add = naive(make_elementwise_add(5, 7));
    EXPECT_EQ(why(add, 0), nullptr);
    const Program rows = naive(make_reduce(ReduceKind::Sum, 6, 9, 4));  // m r n
    EXPECT_EQ(why(rows, 0), nullptr);
    EXPECT_NE(why(apply_all(rows, "down, swap_up"), 0), nullptr);  // r outermost
}

// A variable in blocks (the outer part of one `pack` cut): its coefficient above the span of
// the other terms, so two of its values index disjoint elements; not when the blocks overlap.
TEST(Parallel, LegalOverBlocksThatDoNotOverlap) {
    auto blocks = [](int inner) {
        return parse_program(
            fmt::format("looptool-program 1\nname b\nvar o 4\nvar i {}\n"
                        "tensor X input 4 {}\ntensor Y output {}\n"
                        "stmt Y[3*o+i] = X[o, i]\nnest 0\nloop o 4 0\n"
                        "loop i {} 0\ncursor 0\n",
                        inner, inner, 9 + inner, inner));
    };
    EXPECT_EQ(why(blocks(3), 0), nullptr);
    EXPECT_TRUE(matches_reference(jit_with(2), parallel_at(blocks(3), 0)));
    EXPECT_EQ(why(blocks(2), 0), nullptr);    // gaps between the blocks
    const char *overlap = why(blocks(4), 0);  // Y[3] is o = 0's and o = 1's
    ASSERT_NE(overlap, nullptr);
    EXPECT_NE(std::string(overlap).find("a reduction over it would race"), std::string::npos);
}

TEST(Parallel, RefusesWhatWouldBreakIt) {
    Program p = parallel_at(tests::matmul_program(16, 32, 8), 0);
    EXPECT_STREQ(why_illegal(p, Action::Parallel), "the loop is already parallel");
    EXPECT_STREQ(why_illegal(p, Action::SwapDown), "a parallel loop must stay outermost");
    EXPECT_STREQ(why_illegal(p, Action::Unroll), "the loop is parallel");
    EXPECT_STREQ(why_illegal(p, Action::Flatten), "the program has a parallel loop already");
    EXPECT_STREQ(why_illegal(p, Action::Pack), "the program has a parallel loop already");
    Program below = p;
    below.cursor = 1;
    EXPECT_STREQ(why_illegal(below, Action::SwapUp), "a parallel loop must stay outermost");
    // A split keeps the outer part parallel; a merge back keeps it too.
    Program split = apply(p, Action::Split4);
    EXPECT_TRUE(split.tree.nests[0].loops[0].parallel);
    EXPECT_FALSE(split.tree.nests[0].loops[1].parallel);
    split.cursor = 1;
    Program merged = apply(split, Action::Merge);
    EXPECT_TRUE(merged.tree.nests[0].loops[0].parallel);
    EXPECT_EQ(merged.tree.nests[0].loops[0].size, 16);
    // An unrolled or vectorized loop cannot be made parallel.
    Program add = naive(make_elementwise_add(4, 8));
    EXPECT_STREQ(why_illegal(apply(add, Action::Unroll), Action::Parallel), "the loop is unrolled");
}

TEST(Parallel, TheTextFormatWritesAndReadsTheMark) {
    const Program p = parallel_at(tests::matmul_program(16, 32, 8), 0);
    const std::string text = serialize(p);
    EXPECT_NE(text.find("loop m 16 0 parallel\n"), std::string::npos) << text;
    EXPECT_TRUE(parse_program(text).same_as(p));
    EXPECT_NE(dump(p).find("for m in 16 : L0 [parallel] <<<<<< cursor"), std::string::npos);
    // A mark where the rule refuses it is an error naming why, not a racing kernel.
    std::string bad = text;
    bad.replace(bad.find("loop k 8 0"), 10, "loop k 8 0 parallel");
    try {
        parse_program(bad, "bad.txt");
        FAIL() << "a parallel inner loop was read";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("only the outermost loop"), std::string::npos)
            << e.what();
    }
}

TEST(Parallel, OneThreadLowersTheMarkAsAPlainLoop) {
    const Program p = parallel_at(tests::matmul_program(64, 64, 64), 0);
    LowerOptions one, two;
    two.threads = 2;
    const LoweredIR a = lower_to_llvm_ir(p, "k", one), b = lower_to_llvm_ir(p, "k", two);
    EXPECT_EQ(a.summary.parallel_nests, 0);
    EXPECT_EQ(a.ir.find("looptool_parallel_for"), std::string::npos);
    EXPECT_EQ(a.ir, lower_to_llvm_ir(tests::matmul_program(64, 64, 64), "k", one).ir);
    EXPECT_EQ(b.summary.parallel_nests, 1);
    EXPECT_NE(b.ir.find("call void @looptool_parallel_for(ptr @looptool_thread_pool"),
              std::string::npos);
}

TEST(Parallel, MatmulKernelsMatchTheReference) {
    // Naive, with the write nest parallel too, and tiles with tails (37 rows in 8-row tiles).
    expect_matches_on_every_thread_count(
        parallel_at(parallel_at(tests::matmul_program(37, 19, 5), 0), 1));
    for (auto [m, n, k] : {std::tuple{37, 70, 9}, std::tuple{64, 48, 16}})
        for (const auto &s : looptune::schedule_family(m, n, k)) {
            Program p = tests::tiled_matmul(m, n, k, s);
            if (why(p, 0)) continue;
            SCOPED_TRACE(s.name() + fmt::format(" {}x{}x{}", m, n, k));
            expect_matches_on_every_thread_count(parallel_at(p, 0));
        }
}

TEST(Parallel, ConvElementwiseAndReductionKernelsMatchTheReference) {
    // Conv (nests n c ho wo kh kw m; n m ho wo): the batch loop; the output rows moved out, and
    // the write nest's output channels; the input channels (a reduction) refused.
    const Program conv = naive(make_conv2d(3, 4, 7, 6, 5, 3, 2));
    expect_matches_on_every_thread_count(parallel_at(conv, 0));
    const Program rows_out = apply_all(conv, "down, down, swap_up, swap_up");
    Program channels_out = rows_out;
    channels_out.cursor = rows_out.tree.flat({1, 1});
    channels_out = parallel_at(apply(channels_out, Action::SwapUp), 1);
    expect_matches_on_every_thread_count(parallel_at(channels_out, 0));
    EXPECT_NE(why(apply_all(conv, "down, swap_up"), 0), nullptr);
    expect_matches_on_every_thread_count(parallel_at(naive(make_elementwise_add(13, 33)), 0));
    for (ReduceKind k : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min})
        expect_matches_on_every_thread_count(parallel_at(naive(make_reduce(k, 7, 20, 9)), 0));
    // Rows of a softmax and a layer norm: every nest parallel over its rows.
    for (Computation c : {make_softmax(11, 40), make_layernorm(5, 33)}) {
        Program p = naive(std::move(c));
        for (int n = 0; n < int(p.tree.nests.size()); ++n)
            if (!why(p, p.tree.flat({n, 0}))) p = parallel_at(p, n);
        expect_matches_on_every_thread_count(p);
    }
}

TEST(Parallel, OverTheEmissionBudgetTheGenericNestRunsInParallelToo) {
    JitOptions o;
    o.threads = 3;
    o.lower.max_emission_cost = 1;  // every nest generic
    auto jit = Jit::create(o);
    Program p = parallel_at(apply_all(tests::matmul_program(37, 20, 6), "split_8"), 0);
    EXPECT_TRUE(matches_reference(*jit, p));
}

// Random legal sequences of the `threads` preset (parallel among them) on odd shapes: every
// kernel matches the reference on 3 threads.
TEST(Parallel, RandomThreadsSequencesMatchTheReference) {
    std::mt19937_64 rng(41);
    const ActionSpace space = ActionSpace::preset("threads");
    int parallel = 0;
    for (int i = 0; i < 60; ++i) {
        std::vector<Action> taken;
        Program p = tests::random_walk(tests::random_matmul(rng, 1 << 14), rng, 16, space, &taken);
        for (const Nest &n : p.tree.nests) parallel += n.loops[0].parallel;
        ASSERT_TRUE(matches_reference(jit_with(3), p))
            << fmt::format("{}", fmt::join(action_names(taken), ","));
    }
    EXPECT_GT(parallel, 5) << "too few walks took `parallel` to test it";
}

TEST(Parallel, CancelStopsEveryThread) {
    const Program p = parallel_at(tests::matmul_program(512, 512, 512), 0);
    Kernel k = jit_with(2).compile(p);
    Buffers b = make_buffers(p.computation(), 3);
    auto ptrs = b.pointers();
    const int32_t go = 0, stop = 1;
    auto time = [&](const int32_t *flag) {
        auto t0 = std::chrono::steady_clock::now();
        k.fn(ptrs.data(), flag);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    time(&go);
    const double full = time(&go);
    const double cancelled = time(&stop);
    EXPECT_LT(cancelled, 0.2 * full) << "full " << full << " s, cancelled " << cancelled << " s";
}

TEST(Parallel, ThePoolRunsEveryIterationOnceInContiguousChunks) {
    ThreadPool pool(3);
    struct Seen {
        std::vector<int> count;
        std::vector<std::thread::id> who;
    };
    for (int64_t n : {1, 2, 3, 7, 100}) {
        Seen seen{std::vector<int>(size_t(n)), std::vector<std::thread::id>(size_t(n))};
        pool.run(
            [](void *ctx, int64_t b, int64_t e) {
                auto *s = static_cast<Seen *>(ctx);
                for (int64_t i = b; i < e; ++i) {
                    s->count[size_t(i)]++;
                    s->who[size_t(i)] = std::this_thread::get_id();
                }
            },
            &seen, n);
        for (int c : seen.count) EXPECT_EQ(c, 1);
        EXPECT_EQ(seen.who[0], std::this_thread::get_id()) << "the caller takes the first chunk";
        // Each of the min(n, 3) chunks runs on one thread (the caller runs those a worker has
        // not started), so the thread changes only where a chunk ends.
        const int64_t chunks = std::min<int64_t>(n, 3);
        auto chunk_of = [&](int64_t i) {
            int64_t c = 0;
            while (c + 1 < chunks && (c + 1) * n / chunks <= i) ++c;
            return c;
        };
        for (int64_t i = 1; i < n; ++i)
            if (chunk_of(i) == chunk_of(i - 1))
                EXPECT_EQ(seen.who[size_t(i)], seen.who[size_t(i - 1)]) << i << " of " << n;
    }
}

namespace {

std::vector<int> allowed_cpus() {
    cpu_set_t set;
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

/// Pins the calling thread to one core until destroyed, as the measurement protocol does.
struct PinnedTo {
    cpu_set_t saved;
    explicit PinnedTo(int cpu) {
        sched_getaffinity(0, sizeof(saved), &saved);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        EXPECT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    }
    ~PinnedTo() { sched_setaffinity(0, sizeof(saved), &saved); }
};

/// The threads of this process (/proc/self/task).
std::set<int> process_tids() {
    std::set<int> tids;
    for (const auto &e : std::filesystem::directory_iterator("/proc/self/task"))
        tids.insert(std::stoi(e.path().filename().string()));
    return tids;
}

std::vector<int> cpus_of(int tid) {
    cpu_set_t set;
    std::vector<int> cpus;
    if (sched_getaffinity(tid, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

/// Checks the workers' affinity masks against a caller on `caller` and the creator's cores
/// `allowed`: each worker may run on cores the creator may use, none on the caller's, so the
/// caller and the workers cover distinct cores.
void expect_spread(const std::vector<std::vector<int>> &workers, int caller,
                   const std::vector<int> &allowed) {
    std::set<int> covered{caller};
    for (const auto &cpus : workers) {
        ASSERT_FALSE(cpus.empty());
        for (int c : cpus) {
            EXPECT_NE(c, caller) << "a worker may share the caller's core";
            EXPECT_NE(std::find(allowed.begin(), allowed.end(), c), allowed.end()) << c;
            covered.insert(c);
        }
    }
    if (!workers.empty()) {
        EXPECT_GE(covered.size(), 2u);
    }
}

}  // namespace

// The workers of a pool made by a thread that may use several cores go to other cores than
// the caller's, even when the caller is pinned to one core at the first parallel call (as a
// measurement pins it): a pool that inherited that core would run both chunks on it.
// Timing-free: it reads the affinity masks the OS holds.
TEST(Parallel, ThePoolsWorkersAreOnOtherCoresThanAPinnedCaller) {
    const std::vector<int> allowed = allowed_cpus();
    if (allowed.size() < 2) GTEST_SKIP() << "one core: nothing to spread over";
    for (int threads : {2, int(allowed.size()), int(allowed.size()) + 1}) {
        SCOPED_TRACE(fmt::format("{} threads", threads));
        ThreadPool pool(threads);
        EXPECT_TRUE(pool.worker_cpus().empty()) << "workers start at the first parallel call";
        for (int caller : {allowed.back(), allowed.front()}) {  // then moved: re-pinned
            PinnedTo pin(caller);
            pool.run([](void *, int64_t, int64_t) {}, nullptr, threads);
            const auto workers = pool.worker_cpus();
            EXPECT_EQ(workers.size(), size_t(threads - 1));
            expect_spread(workers, caller, allowed);
        }
    }
}

// The same through a Jit and a parallel kernel: the pool threads its first parallel call
// starts (named looptool-pool).
TEST(Parallel, AJitsParallelKernelRunsOnOtherCoresThanAPinnedCaller) {
    const std::vector<int> allowed = allowed_cpus();
    if (allowed.size() < 2) GTEST_SKIP() << "one core: nothing to spread over";
    JitOptions o;
    o.threads = 2;
    std::unique_ptr<Jit> jit = Jit::create(o);  // made while every allowed core is usable
    const Program p = parallel_at(tests::matmul_program(32, 48, 16), 0);
    const std::set<int> before = process_tids();
    PinnedTo pin(allowed.front());
    EXPECT_TRUE(matches_reference(*jit, p));
    std::vector<std::vector<int>> started;
    for (int tid : process_tids())
        if (!before.count(tid) &&
            tests::slurp(fmt::format("/proc/self/task/{}/comm", tid)) == "looptool-pool\n")
            started.push_back(cpus_of(tid));
    ASSERT_EQ(started.size(), 1u) << "one worker for 2 threads";
    expect_spread(started, allowed.front(), allowed);
}

// With threads > 1 every matmul tile seed also comes with its outermost loops parallel, first;
// with 1 thread the seeds are as before.
TEST(Parallel, SeedsComeWithParallelVariantsAboveOneThread) {
    const Program naive = tests::matmul_program(64, 96, 48);
    const ActionSpace full = ActionSpace::preset("full");
    const auto one = looptune::tune_seeds(naive.computation(), looptune::kSeedSteps, full);
    const auto two =
        looptune::tune_seeds(naive.computation(), looptune::kSeedSteps, full, false, 2);
    for (const auto &s : one) EXPECT_EQ(s.name.find("parallel"), std::string::npos) << s.name;
    ASSERT_GT(two.size(), one.size());
    ASSERT_NE(two[0].name.find(" parallel"), std::string::npos) << two[0].name;
    int variants = 0;
    for (const auto &s : two) {
        if (s.name.find(" parallel") == std::string::npos) continue;
        ++variants;
        Program p = naive;
        for (Action a : s.actions) p = apply(p, a);
        EXPECT_TRUE(p.tree.nests[0].loops[0].parallel) << s.name;
        EXPECT_TRUE(matches_reference(jit_with(2), p)) << s.name;
    }
    EXPECT_EQ(size_t(variants) + one.size(), two.size());
}

// A conv of one image: its batch loop, outermost in the seeds, gives way to the loop below it,
// which runs in parallel; every such variant matches the reference.
TEST(Parallel, ConvSeedsOfOneImageComeWithParallelVariants) {
    const Program conv = naive(make_conv2d(1, 16, 18, 18, 32, 3, 3));
    const ActionSpace full = ActionSpace::preset("full");
    const auto two = looptune::tune_seeds(conv.computation(), 200, full, false, 2);
    int variants = 0;
    for (const auto &s : two) {
        if (s.name.find(" parallel") == std::string::npos) continue;
        ++variants;
        Program p = conv;
        for (Action a : s.actions) p = apply(p, a);
        bool marked = false;
        for (const auto &nest : p.tree.nests) marked = marked || nest.loops[0].parallel;
        EXPECT_TRUE(marked) << s.name;
        EXPECT_TRUE(matches_reference(jit_with(2), p)) << s.name;
    }
    EXPECT_GT(variants, 0);
}

// A packed conv tile's copy nest shares the channel-block loop with the conv's, and no shared
// loop may be parallel; above one thread each such seed also comes with W packed above every
// loop instead: a copy nest of its own, both nests' outermost loops parallel.
TEST(Parallel, PackedConvSeedsComeWithTheirPackOnTopInParallel) {
    const Program conv = naive(make_conv2d(1, 16, 18, 18, 32, 3, 3));
    const ActionSpace full = ActionSpace::preset("full");
    for (const auto &s : looptune::tune_seeds(conv.computation(), 200, full))
        EXPECT_EQ(s.name.find("packed on top"), std::string::npos) << s.name;
    int top = 0;
    for (const auto &s : looptune::tune_seeds(conv.computation(), 200, full, false, 2)) {
        if (s.name.find("packed on top parallel") == std::string::npos) continue;
        ++top;
        Program p = conv;
        for (Action a : s.actions) p = apply(p, a);
        int parallel = 0;
        for (const auto &nest : p.tree.nests) {
            EXPECT_EQ(nest.shared, 0) << s.name << "\n" << dump(p);
            parallel += nest.loops[0].parallel;
        }
        EXPECT_GE(parallel, 2) << s.name << "\n" << dump(p);
        EXPECT_TRUE(matches_reference(jit_with(2), p)) << s.name;
    }
    EXPECT_GT(top, 0);
}

// The tile template's parallel conv members: the channel blocks above the batch loop and
// parallel within a 16-action episode, the rest of the tile below them; unpacked `mh` and
// flat tiles only.
TEST(Parallel, ParallelConvTilesMarkTheChannelBlocksEarly) {
    const Program conv = naive(make_conv2d(1, 8, 12, 36, 32, 3, 3));
    int members = 0;
    for (looptune::ConvTileSchedule s : looptune::conv_schedule_family(32, 34, 0, true)) {
        s.parallel = true;
        std::vector<Action> actions;
        try {
            actions = looptune::conv_tile_actions(conv.computation(), s);
        } catch (const Error &) {
            EXPECT_TRUE(s.pack || s.vector_m || s.outer != "mh" || s.tm >= 32) << s.name();
            continue;
        }
        ++members;
        const auto at = std::find(actions.begin(), actions.end(), Action::Parallel);
        ASSERT_NE(at, actions.end()) << s.name();
        EXPECT_LT(at - actions.begin(), 16) << s.name();  // within a policy's episode
        Program p = conv;
        for (Action a : actions) p = apply(p, a);
        EXPECT_TRUE(p.tree.nests[0].loops[0].parallel) << s.name() << "\n" << dump(p);
        EXPECT_TRUE(p.tree.nests[0].loops.back().vectorize) << s.name();
        EXPECT_TRUE(matches_reference(jit_with(2), p)) << s.name();
    }
    EXPECT_GE(members, 3);
}

// A decode-time matmul (m = 1): its streaming seeds have the k block outermost, a reduction no
// thread can take. Above one thread they come as column bands too: n blocks outermost and
// parallel, each band still streaming its share of B's rows in k blocks; n = 1536 gives the
// widest block (1024: two blocks, one a thread) and the one that splits evenly in two (256: six
// blocks, 1024 would leave one thread twice the columns of the other). Each matches the
// reference.
TEST(Parallel, DecodeTimeSeedsComeAsParallelColumnBands) {
    const Program naive = tests::matmul_program(1, 1536, 600);
    const ActionSpace full = ActionSpace::preset("full");
    const auto one = looptune::tune_seeds(naive.computation(), looptune::kSeedSteps, full);
    const auto two =
        looptune::tune_seeds(naive.computation(), looptune::kSeedSteps, full, false, 2);
    for (const auto &s : one) EXPECT_EQ(s.name.find(" nb"), std::string::npos) << s.name;
    std::set<int64_t> blocks;
    for (const auto &s : two) {
        if (s.name.find(" nb") == std::string::npos) continue;
        SCOPED_TRACE(s.name);
        EXPECT_NE(s.name.find(" parallel"), std::string::npos);
        Program p = naive;
        for (Action a : s.actions) p = apply(p, a);
        const Loop &outer = p.tree.nests[0].loops[0], &next = p.tree.nests[0].loops[1];
        EXPECT_TRUE(outer.parallel);
        EXPECT_EQ(outer.var, naive.tree.nests[0].loops[2].var);  // n
        blocks.insert(outer.size + (outer.tail > 0));
        EXPECT_EQ(next.var, naive.tree.nests[0].loops[1].var);  // the k block
        expect_matches_on_every_thread_count(p);
    }
    EXPECT_EQ(blocks, (std::set<int64_t>{2, 6}));
}
