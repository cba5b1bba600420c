// The lowering and the JIT: every kernel is checked against the reference interpreter.
#include "looptool/jit/jit.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/lower/lower.h"
#include "looptool/lower/optimize.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;
using looptool::tests::matches_reference;
using looptool::tests::matmul_program;

namespace {

using looptool::tests::shared_jit;

Program program_of(Computation c) {
    return Program::naive(std::make_shared<Computation>(std::move(c)));
}

Program apply_all(Program p, const std::string &actions) {
    for (Action a : parse_action_list(actions)) p = apply(p, a);
    return p;
}

// The 8x32 register tile from the naive m, k, n nest: m_o, n_o, k, m_i (unrolled),
// n_i (vectorized).
const char *kTile8x32 =
    "split_8, down, down, down, split_32, swap_up, swap_up, down, swap_down, unroll, down, "
    "vectorize";

}  // namespace

TEST(Jit, CreateReportsTheHost) {
    Jit &jit = shared_jit();
    EXPECT_FALSE(jit.host_cpu().empty());
    EXPECT_NE(jit.host_features().find("+"), std::string::npos);
}

// Codegen runs without loop strength reduction (optimize.cpp): the option is LLVM's own, so a
// new LLVM that renamed it would quietly bring back its compile time.
TEST(Jit, CodegenSkipsLoopStrengthReduction) {
    auto jit = Jit::create();
    EXPECT_TRUE(detail::strength_reduction_disabled());
}

TEST(Jit, NaiveNests) {
    for (auto [m, n, k] : {std::tuple{64, 64, 64}, {37, 100, 129}, {1, 3, 17}})
        EXPECT_TRUE(matches_reference(shared_jit(), matmul_program(m, n, k)));
    EXPECT_TRUE(matches_reference(shared_jit(), program_of(make_elementwise_add(37, 100))));
    EXPECT_TRUE(matches_reference(shared_jit(), program_of(make_conv2d(2, 3, 9, 10, 4, 3, 2))));
}

TEST(Jit, UnoptimisedAndVerboseKernelsAreCorrectToo) {
    JitOptions o;
    o.optimize_ir = false;
    o.verbose = true;
    auto jit = Jit::create(o);
    ::testing::internal::CaptureStderr();
    auto r = matches_reference(*jit, apply_all(matmul_program(37, 100, 29), kTile8x32));
    std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(r);
    EXPECT_NE(log.find("LLVM IR before optimisation"), std::string::npos);
    EXPECT_NE(log.find("define void @looptool_kernel_0"), std::string::npos);
}

TEST(Jit, RegisterTile8x32WithAndWithoutTails) {
    for (auto [m, n, k] : {std::tuple{112, 208, 256}, {37, 100, 129}, {16, 64, 5}}) {
        Program p = apply_all(matmul_program(m, n, k), kTile8x32);
        const Nest &nest = p.tree.nests[0];
        ASSERT_EQ(nest.loops.size(), 5u);
        EXPECT_TRUE(nest.loops[3].unroll && nest.loops[3].var == 0);
        EXPECT_TRUE(nest.loops[4].vectorize && nest.loops[4].var == 2);
        EXPECT_TRUE(matches_reference(shared_jit(), p)) << m << "x" << n << "x" << k;
        LoweringSummary s = lower_to_llvm_ir(p).summary;
        EXPECT_GE(s.register_tiles, 1);
        EXPECT_EQ(s.zero_start_tiles, s.register_tiles);
        EXPECT_TRUE(s.copy_elided);
        EXPECT_TRUE(s.zeroed_tensors.empty()) << "zero-start tiles cover every element";
        // Without copy elision the temporary is still computed in registers and copied.
        JitOptions o;
        o.lower.elide_copies = false;
        auto jit = Jit::create(o);
        EXPECT_TRUE(matches_reference(*jit, p));
    }
    // The micro-kernel is really there: FMAs on <32 x float> accumulators.
    std::string ir = lower_to_llvm_ir(apply_all(matmul_program(112, 208, 256), kTile8x32)).ir;
    EXPECT_NE(ir.find("call <32 x float> @llvm.fmuladd.v32f32"), std::string::npos);
    EXPECT_NE(ir.find("phi <32 x float>"), std::string::npos);
}

TEST(Jit, KBlockedOutsideTheTileLoadsAccumulators) {
    // [k_o, m_o, n_o, k_i, m_i, n_i]: each tile is revisited once per k_o block.
    Program p = apply_all(matmul_program(48, 96, 600),
                          std::string(kTile8x32) + ", up, up, split_256, swap_up, swap_up");
    ASSERT_EQ(p.tree.nests[0].loops[0].var, 1);
    ASSERT_EQ(p.tree.nests[0].loops[0].size, 2);
    ASSERT_EQ(p.tree.nests[0].loops[0].tail, 88);
    EXPECT_TRUE(matches_reference(shared_jit(), p));
    LoweringSummary s = lower_to_llvm_ir(p).summary;
    EXPECT_GE(s.register_tiles, 1);
    EXPECT_EQ(s.zero_start_tiles, 0);
    EXPECT_FALSE(s.zeroed_tensors.empty());
    // [m_o, n_o, k_o, k_i, m_i, n_i]: one region over both k loops, started at zero.
    Program q =
        apply_all(matmul_program(48, 96, 600), std::string(kTile8x32) + ", up, up, split_256");
    EXPECT_TRUE(matches_reference(shared_jit(), q));
    LoweringSummary sq = lower_to_llvm_ir(q).summary;
    EXPECT_GE(sq.zero_start_tiles, 1);
    EXPECT_TRUE(sq.zeroed_tensors.empty());
}

TEST(Jit, VectorizeWithTail) {
    // n = 100 in vectors of 16: six full vectors and one of 4.
    Program add =
        apply_all(program_of(make_elementwise_add(37, 100)), "down, split_16, down, vectorize");
    EXPECT_TRUE(matches_reference(shared_jit(), add));
    EXPECT_NE(lower_to_llvm_ir(add).ir.find("<4 x float>"), std::string::npos);
    Program mm = apply_all(matmul_program(37, 100, 29), "down, down, split_16, down, vectorize");
    EXPECT_TRUE(matches_reference(shared_jit(), mm));
    // A vectorized reduction var (k innermost) with a tail: horizontal reductions.
    Program red =
        apply_all(matmul_program(9, 11, 37), "down, swap_down, split_16, down, vectorize");
    ASSERT_EQ(red.tree.nests[0].loops.back().var, 1);
    EXPECT_TRUE(matches_reference(shared_jit(), red));
    // Gathers and scatters: vectorize m (stride k in A, stride n in C).
    Program gather = apply_all(matmul_program(20, 7, 5), "swap_down, swap_down, vectorize");
    EXPECT_TRUE(matches_reference(shared_jit(), gather));
}

// Masked pieces (vector_pieces): 14, 7 and 27 output columns of a conv tile, each row one
// masked vector (its lanes past the row neither loaded nor stored: X's last row ends the buffer).
TEST(Jit, MaskedVectorTailsMatchTheReference) {
    for (auto [h, w, tm, tw] :
         {std::tuple{6, 16, 4, 32}, {5, 9, 8, 16}, {4, 29, 4, 64}, {4, 29, 8, 16}, {3, 5, 2, 32}}) {
        Program p = program_of(make_conv2d(1, 3, h, w, 5, 3, 3));
        for (Action a : looptune::conv_tile_actions(p.computation(), {tm, tw, "hm"}))
            p = apply(p, a);
        EXPECT_TRUE(matches_reference(shared_jit(), p)) << h << "x" << w;
        if (w - 2 != 16 && w - 2 != 8)
            EXPECT_NE(lower_to_llvm_ir(p).ir.find("llvm.masked.store"), std::string::npos)
                << h << "x" << w;
    }
    // Gathers and scatters in a masked piece: m vectorized (stride n in T and Y).
    Program gather = apply_all(program_of(make_elementwise_add(14, 5)), "swap_down, vectorize");
    EXPECT_TRUE(matches_reference(shared_jit(), gather));
}

// A channel-vectorized conv tile (m across the vector, tw output columns unrolled): each run of
// 2-8 accumulators at consecutive columns is stored through an in-register transpose as runs
// of up to 4 floats (masked past the run), not scattered; where the channels' planes are under
// 8 floats apart (a 2x3 output) the scatter stays.
TEST(Jit, ChannelVectorTilesStoreRunsNotScatters) {
    for (auto [h, w, m, tm, tw] : {std::tuple{9, 9, 32, 16, 7},
                                   {9, 10, 32, 16, 8},
                                   {6, 14, 16, 8, 12},
                                   {5, 7, 8, 4, 5},
                                   {4, 4, 32, 32, 2},
                                   {5, 12, 16, 16, 4},
                                   {4, 5, 16, 16, 3}}) {
        Program p = program_of(make_conv2d(1, 3, h, w, m, 3, 3));
        looptune::ConvTileSchedule s{tm, tw, "mh", false, true, true};
        for (Action a : looptune::conv_tile_actions(p.computation(), s)) p = apply(p, a);
        EXPECT_TRUE(matches_reference(shared_jit(), p)) << h << "x" << w << " tile " << s.name();
        const bool narrow = (h - 2) * (w - 2) < 8;
        EXPECT_EQ(lower_to_llvm_ir(p).ir.find("llvm.masked.scatter") != std::string::npos, narrow)
            << h << "x" << w << " tile " << s.name();
    }
}

// 1x1 convs and elementwise adds in the `layout` space (flatten among the actions): random
// schedules, each kernel against the reference.
TEST(Jit, RandomLayoutSchedulesMatchTheReference) {
    std::mt19937_64 rng(15);
    auto jit = Jit::create();
    const ActionSpace space = ActionSpace::preset("layout");
    int failures = 0, flattened = 0;
    for (int i = 0; i < 60; ++i) {
        Program start = program_of(i % 3 ? make_conv2d(1, 3 + i % 4, 5 + i % 5, 7 + i % 3, 6, 1, 1)
                                         : make_elementwise_add(5 + i % 7, 9 + i % 4));
        const size_t vars = start.comp->vars.size();
        start.cursor = i % start.tree.num_loops();
        if (i % 2 == 0 && is_legal(start, Action::Flatten)) start = apply(start, Action::Flatten);
        std::vector<Action> taken;
        Program p = looptool::tests::random_walk(start, rng, 20, space, &taken);
        flattened += p.comp->vars.size() < vars;
        auto r = matches_reference(*jit, p);
        if (!r) {
            ++failures;
            ADD_FAILURE() << r.message();
        }
    }
    EXPECT_EQ(failures, 0);
    EXPECT_GE(flattened, 10);
}

TEST(Jit, EveryLaneOfAScatterCarriesItsOwnAlignment) {
    // Found by the random-schedule check (docs/reliability.md): m vectorized across rows of 129
    // floats under an unrolled n split by 4. Each lane once took the previous lane's alignment,
    // so the SLP vectorizer merged the row-1 stores into an aligned 16-byte store at an address
    // that is only 4-byte aligned: SIGSEGV.
    Program p = apply_all(program_of(make_elementwise_add(3, 129)),
                          "swap_down, vectorize, up, unroll, split_4, split_2, down, merge");
    EXPECT_TRUE(matches_reference(shared_jit(), p));
}

TEST(Jit, UnrollWithTail) {
    // m = 37 = 4 * 8 + 5: the outer loop unrolled into 5 copies, the inner into 8 (or 5).
    Program p = apply_all(matmul_program(37, 20, 10), "split_8, unroll, down, unroll");
    EXPECT_TRUE(p.tree.nests[0].loops[0].unroll && p.tree.nests[0].loops[1].unroll);
    EXPECT_TRUE(matches_reference(shared_jit(), p));
    EXPECT_TRUE(matches_reference(
        shared_jit(), apply_all(matmul_program(7, 5, 3), "down, unroll, down, unroll")));
}

TEST(Jit, GenericFallbackStaysCorrect) {
    JitOptions o;
    o.lower.max_emission_cost = 1;
    auto jit = Jit::create(o);
    Program p = apply_all(matmul_program(37, 100, 29), kTile8x32);
    EXPECT_TRUE(matches_reference(*jit, p));
    LoweringSummary s = lower_to_llvm_ir(p, "k", o.lower).summary;
    EXPECT_GE(s.generic_nests, 1);
    EXPECT_FALSE(s.zeroed_tensors.empty());
}

TEST(Jit, CopyOnlyUnrollingIsDroppedOverTheBudget) {
    // k unrolled 200 times around a plain n loop: 200 loop copies to vectorize.
    Program p = apply_all(matmul_program(20, 30, 200), "down, unroll");
    LoweringSummary s = lower_to_llvm_ir(p).summary;
    EXPECT_EQ(s.relaxed_nests, 1);
    EXPECT_EQ(s.generic_nests, 0);
    EXPECT_TRUE(matches_reference(shared_jit(), p));
    // Under the budget the copies are emitted.
    LowerOptions o;
    o.max_emission_cost = 1 << 20;
    EXPECT_EQ(lower_to_llvm_ir(p, "k", o).summary.relaxed_nests, 0);
}

TEST(Jit, CacheIgnoresTheCursor) {
    auto jit = Jit::create();
    Program p = apply_all(matmul_program(16, 16, 16), "split_4");
    Kernel a = jit->compile(p);
    EXPECT_FALSE(a.cached);
    EXPECT_GT(a.compile_ms, 0);
    Program q = apply(p, Action::Down);
    ASSERT_NE(q.cursor, p.cursor);
    Kernel b = jit->compile(q);
    EXPECT_TRUE(b.cached);
    EXPECT_EQ(b.fn, a.fn);
    EXPECT_EQ(jit->cache_size(), 1u);
    Kernel c = jit->compile(apply(q, Action::Unroll));
    EXPECT_FALSE(c.cached);
    EXPECT_NE(c.fn, a.fn);
    EXPECT_EQ(jit->cache_size(), 2u);
}

TEST(Jit, CancelReturnsPromptly) {
    Program p = matmul_program(512, 512, 512);
    Kernel k = shared_jit().compile(p);
    Buffers b = make_buffers(p.computation(), 3);
    auto ptrs = b.pointers();
    const int32_t go = 0, stop = 1;
    auto time = [&](const int32_t *flag) {
        auto t0 = std::chrono::steady_clock::now();
        k.fn(ptrs.data(), flag);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    time(&go);  // warm-up
    const double full = time(&go);
    const float first = b.data[3][0];
    b.data[3][0] = 12345.0f;
    const double cancelled = time(&stop);
    EXPECT_LT(cancelled, 0.2 * full) << "full " << full << " s, cancelled " << cancelled << " s";
    EXPECT_NE(b.data[3][0], first) << "a cancelled kernel stops before computing C";
    time(nullptr);  // a null flag means "never cancel"
    EXPECT_EQ(b.data[3][0], first);
}

// The cancel flag raised mid-call stops a kernel whose outermost loop runs once (a conv's batch
// of one): the loops below it check the flag too.
TEST(Jit, CancelStopsAKernelWhoseOutermostLoopRunsOnce) {
    Program p = Program::naive(std::make_shared<Computation>(make_conv2d(1, 16, 66, 66, 64, 3, 3)));
    ASSERT_EQ(p.tree.nests[0].loops[0].size, 1);
    Kernel k = shared_jit().compile(p);
    Buffers b = make_buffers(p.computation(), 3);
    auto ptrs = b.pointers();
    int32_t flag = 0;
    auto time = [&](double raise_after_s) {
        flag = 0;
        std::thread raiser([&] {
            if (raise_after_s <= 0) return;
            std::this_thread::sleep_for(std::chrono::duration<double>(raise_after_s));
            __atomic_store_n(&flag, 1, __ATOMIC_SEQ_CST);
        });
        auto t0 = std::chrono::steady_clock::now();
        k.fn(ptrs.data(), &flag);
        const double dt =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        raiser.join();
        return dt;
    };
    time(0);  // warm-up
    const double full = time(0);
    const double cancelled = time(0.1 * full);
    EXPECT_LT(cancelled, 0.5 * full) << "full " << full << " s, cancelled " << cancelled << " s";
}

TEST(Jit, InvalidProgramsThrow) {
    Program p = matmul_program(8, 8, 8);
    p.tree.nests[0].loops[0].size = 7;  // covers 7 of m's 8 elements
    EXPECT_THROW(shared_jit().compile(p), Error);
}

TEST(Jit, RandomSchedulesMatchTheReference) {
    std::mt19937_64 rng(20240611);
    struct Case {
        Computation c;
        int sequences;
    };
    std::vector<Case> cases;
    for (auto [m, n, k] : {std::tuple{37, 100, 129},
                           {64, 17, 3},
                           {1, 64, 37},
                           {17, 3, 100},
                           {129, 64, 17},
                           {3, 1, 64},
                           {64, 64, 64}})
        cases.push_back({make_matmul(m, n, k), 45});
    cases.push_back({make_elementwise_add(37, 129), 30});
    cases.push_back({make_elementwise_add(64, 3), 20});
    cases.push_back({make_conv2d(2, 3, 10, 9, 4, 3, 3), 35});
    cases.push_back({make_conv2d(1, 4, 7, 12, 5, 2, 3), 25});
    auto jit = Jit::create();
    int total = 0, failures = 0;
    for (auto &cs : cases) {
        Program start = program_of(cs.c);
        for (int i = 0; i < cs.sequences; ++i) {
            std::vector<Action> taken;
            Program p =
                looptool::tests::random_walk(start, rng, 25, ActionSpace::preset("full"), &taken);
            ++total;
            auto r = matches_reference(*jit, p);
            if (!r) {
                ++failures;
                std::string seq;
                for (Action a : taken) seq += std::string(action_name(a)) + " ";
                ADD_FAILURE() << cs.c.name << " after [" << seq << "]: " << r.message();
            }
        }
    }
    EXPECT_EQ(failures, 0) << "of " << total;
    EXPECT_GE(total, 300);
}

TEST(Jit, CacheIsBoundedAndEvictsTheLeastRecentlyUsed) {
    JitOptions options;
    options.max_cached_kernels = 3;
    auto jit = Jit::create(options);
    Program base = matmul_program(16, 24, 8);
    std::vector<Program> programs{base, apply_all(base, "split_2"), apply_all(base, "split_4"),
                                  apply_all(base, "split_8"), apply_all(base, "down, split_2")};
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(jit->compile(programs[i]).cached);
    EXPECT_TRUE(jit->compile(programs[0]).cached);   // now the most recently used
    EXPECT_FALSE(jit->compile(programs[3]).cached);  // evicts programs[1], the least recent
    EXPECT_EQ(jit->cache_size(), 3u);
    EXPECT_TRUE(jit->compile(programs[0]).cached);
    EXPECT_TRUE(jit->compile(programs[2]).cached);
    EXPECT_FALSE(jit->compile(programs[1]).cached);  // was freed: compiled again
    // Evicted and recompiled kernels still compute the right thing.
    for (const Program &p : programs) EXPECT_TRUE(matches_reference(*jit, p));
    EXPECT_EQ(jit->cache_size(), 3u);
}

// A tile that walks B block by block ("4x64 kb128 nkm": n blocks, k blocks, the m tiles, then
// the block's k) prefetches, with each load of B, the same row of the next k block, 128 rows
// of B further: beyond the page, where the hardware's prefetchers stop (lower_prefetch.h).
// Tiles whose next block is the next columns of the same rows (8x32 mn, 4x64 kb128 knm) have
// none, nor does a kernel lowered with prefetch_blocks off. Prefetches change no result.
TEST(Jit, ATileWalkingBlocksOfBPrefetchesTheNextKBlock) {
    auto mm = std::make_shared<Computation>(make_matmul(40, 512, 600));  // k: 4 blocks + 88
    auto lowered = [&](const looptune::TileSchedule &s, bool prefetch = true) {
        Program p = Program::naive(mm);
        for (Action a : looptune::tile_actions(*mm, s)) p = apply(p, a);
        LowerOptions o;
        o.prefetch_blocks = prefetch;
        return std::make_pair(p, lower_to_llvm_ir(p, "k", o));
    };
    const auto [nkm, ir] = lowered({4, 64, 128, "nkm"});
    EXPECT_EQ(ir.summary.prefetched_reads, 1);
    // One prefetch per line of the 64-float row (4), 128 * 512 floats ahead (the GEP is not
    // inbounds: the last block's next lies past B), read, into L2 (locality 2), data.
    size_t calls = 0;
    const std::string call = "call void @llvm.prefetch.p0(", args = ", i32 0, i32 2, i32 1)";
    for (size_t at = ir.ir.find(call); at != std::string::npos; at = ir.ir.find(call, at + 1)) {
        ++calls;
        EXPECT_EQ(ir.ir.substr(ir.ir.find(')', at) + 1 - args.size(), args.size()), args);
    }
    EXPECT_EQ(calls, 8u) << ir.ir;  // in the full blocks' code and in the 88-row last block's
    for (int line = 0; line < 4; ++line)
        EXPECT_NE(ir.ir.find("i64 " + std::to_string(128 * 512 + 16 * line) + "\n"),
                  std::string::npos)
            << ir.ir;
    EXPECT_TRUE(matches_reference(shared_jit(), nkm));
    EXPECT_EQ(lowered({4, 64, 128, "nkm"}, false).second.summary.prefetched_reads, 0);
    EXPECT_EQ(lowered({8, 32, 0, "mn"}).second.summary.prefetched_reads, 0);
    EXPECT_EQ(lowered({4, 64, 128, "knm"}).second.summary.prefetched_reads, 0);
    // With B packed block by block (k a multiple of the block, so k is cut into k_o and k_i),
    // the copy nest reads B and prefetches its next block: its shared loops walk the blocks.
    auto cut = std::make_shared<Computation>(make_matmul(40, 512, 512));
    looptune::TileSchedule packed{4, 64, 128, "nkm"};
    packed.pack = true;
    Program p = Program::naive(cut);
    for (Action a : looptune::tile_actions(*cut, packed)) p = apply(p, a);
    ASSERT_GT(p.tree.nests[0].shared, 0) << dump(p);
    const LoweredIR packed_ir = lower_to_llvm_ir(p, "k");
    EXPECT_EQ(packed_ir.summary.prefetched_reads, 1);
    EXPECT_NE(packed_ir.ir.find("i64 " + std::to_string(128 * 512) + "\n"), std::string::npos);
    EXPECT_TRUE(matches_reference(shared_jit(), p));
}

namespace {

/// p's kernel, lowered for `align`-byte aligned tensors, run on copies of its inputs and
/// outputs starting `offset` floats past a 64-byte boundary (temporaries stay aligned).
::testing::AssertionResult matches_reference_shifted(Jit &jit, const Program &p, int offset) {
    const Computation &c = p.computation();
    Buffers b = make_buffers(c, 11);
    const Reference want = compute_reference(c, b);
    fill_non_inputs(c, b, std::numeric_limits<float>::quiet_NaN());
    std::vector<float *> ptrs = b.pointers();
    std::vector<TensorData> shifted(c.tensors.size());
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        if (c.tensors[t].kind != TensorKind::Input && c.tensors[t].kind != TensorKind::Output)
            continue;
        shifted[t].assign(b.data[t].size() + size_t(offset), 0.f);
        std::copy(b.data[t].begin(), b.data[t].end(), shifted[t].begin() + offset);
        ptrs[t] = shifted[t].data() + offset;
    }
    const KernelFn fn = jit.compile(p).fn;
    for (int run = 0; run < 2; ++run) {
        fn(ptrs.data(), nullptr);
        for (size_t t = 0; t < c.tensors.size(); ++t)
            if (c.tensors[t].kind == TensorKind::Output)
                std::copy(ptrs[t], ptrs[t] + b.data[t].size(), b.data[t].begin());
        const Comparison cmp = compare_outputs(c, want, b);
        if (!cmp.ok)
            return ::testing::AssertionFailure()
                   << "+" << offset << " floats, run " << run << ": " << cmp.first_mismatch << "\n"
                   << dump(p, false);
    }
    return ::testing::AssertionSuccess();
}

std::unique_ptr<Jit> unaligned_jit() {
    JitOptions o;
    o.lower.buffer_align = 4;
    o.threads = 1;
    return Jit::create(o);
}

}  // namespace

// buffer_align = 4 (what `lib build` lowers with): every schedule's kernel is correct on
// tensors at any float offset from a 64-byte boundary, the tile families as the random walks.
TEST(Jit, KernelsForAnyAlignmentAreCorrectOnShiftedTensors) {
    auto jit = unaligned_jit();
    std::mt19937_64 rng(4);
    int total = 0;
    for (int offset : {1, 2, 3, 4, 8}) {
        EXPECT_TRUE(matches_reference_shifted(*jit, tests::tiled_matmul(64, 64, 64, {}), offset));
        EXPECT_TRUE(matches_reference_shifted(
            *jit, apply_all(program_of(make_matmul(37, 100, 129)), kTile8x32), offset));
        Program conv = program_of(make_conv2d(1, 3, 6, 16, 5, 3, 3));
        for (Action a : looptune::conv_tile_actions(conv.computation(), {4, 32, "hm"}))
            conv = apply(conv, a);
        EXPECT_TRUE(matches_reference_shifted(*jit, conv, offset));
        for (const Computation &c :
             {make_matmul(37, 100, 129), make_matmul(64, 17, 3), make_conv2d(2, 3, 10, 9, 4, 3, 3),
              make_elementwise_add(37, 129)})
            for (int i = 0; i < 12; ++i, ++total) {
                const Program p = tests::random_walk(program_of(c), rng, 25);
                EXPECT_TRUE(matches_reference_shifted(*jit, p, offset)) << c.name;
            }
    }
    EXPECT_EQ(total, 240);
}

TEST(Jit, KernelsForAnyAlignmentClaimNoAlignmentOfTheirTensors) {
    LowerOptions o;
    o.buffer_align = 4;
    const Program p = tests::tiled_matmul(64, 64, 64, {});
    // The inputs and the output claim 4 bytes, so no load or store claims 64; the temporary T
    // (allocated 64-byte aligned when it is not elided) keeps 64.
    auto accesses_at_64 = [](const std::string &ir) {
        int n = 0;
        std::istringstream lines(ir);
        for (std::string line; std::getline(lines, line);)
            n += (line.find(" load ") != std::string::npos ||
                  line.find("store ") != std::string::npos) &&
                 line.find("align 64") != std::string::npos;
        return n;
    };
    const std::string ir = lower_to_llvm_ir(p, "k", o).ir;
    for (const char *t : {"%A", "%B", "%C"})
        EXPECT_NE(ir.find(fmt::format("align 4 dereferenceable(16384) {}", t)), std::string::npos)
            << t;
    EXPECT_EQ(accesses_at_64(ir), 0);
    EXPECT_GT(accesses_at_64(lower_to_llvm_ir(p).ir), 0);
    for (int bad : {0, 2, 12, 128}) {
        o.buffer_align = bad;
        EXPECT_THROW(lower_to_llvm_ir(p, "k", o), Error) << bad;
    }
}
