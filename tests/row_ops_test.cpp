// Reductions other than sum (max, min), the softmax and layernorm built on them, and how they
// are written, interpreted, lowered and verified (row_ops.h, ir.h ReduceKind).
#include "looptool/ir/row_ops.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include "looptool/check/schedule_check.h"
#include "looptool/ir/error.h"
#include "looptool/lower/lower.h"
#include "tests/test_util.h"

namespace looptool {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

const char *kRowMaxMin = R"(looptool-program 1
name rows
var i 2
var j 3
tensor X input 2 3
tensor Mx output 2
tensor Mn output 2
stmt Mx[i] = max(Mx[i], X[i, j])
stmt Mn[i] = min(X[i, j], Mn[i])
nest 0
loop i 2 0
loop j 3 0
nest 1
loop i 2 0
loop j 3 0
cursor 0
)";

Program naive(Computation c) { return Program::naive(std::make_shared<Computation>(std::move(c))); }

Program apply_all(Program p, const std::string &actions) {
    for (Action a : parse_action_list(actions)) p = apply(p, a);
    return p;
}

TEST(RowOps, MaxAndMinParseAsReductionsAndPrintBack) {
    const Program p = parse_program(kRowMaxMin, "rows");
    ASSERT_EQ(p.comp->stmts.size(), 2u);
    EXPECT_EQ(p.comp->stmts[0].reduce, ReduceKind::Max);
    EXPECT_EQ(p.comp->stmts[1].reduce, ReduceKind::Min);
    // The value is the term alone: the output is no longer read.
    EXPECT_EQ(p.comp->stmts[0].value.op, OpKind::Read);
    EXPECT_EQ(p.comp->reduction_into(p.comp->tensor_index("Mx")), ReduceKind::Max);
    const std::string text = serialize(p);
    EXPECT_NE(text.find("stmt Mx[i] = max(Mx[i], X[i, j])\n"), std::string::npos) << text;
    EXPECT_NE(text.find("stmt Mn[i] = min(Mn[i], X[i, j])\n"), std::string::npos) << text;
    const Program again = parse_program(text, "again");
    EXPECT_EQ(*again.comp, *p.comp);
    EXPECT_EQ(serialize(again), text);
    // `T = T + v` is the same sum as `T += v`.
    const Program sum = parse_program(
        "looptool-program 1\nname s\nvar i 2\nvar j 3\ntensor X input 2 3\ntensor T output 2\n"
        "stmt T[i] = X[i, j] * 2 + T[i]\nnest 0\nloop i 2 0\nloop j 3 0\ncursor 0\n",
        "sum");
    EXPECT_EQ(sum.comp->stmts[0].reduce, ReduceKind::Sum);
    EXPECT_EQ(format_stmt(*sum.comp, sum.comp->stmts[0]), "T[i] += X[i, j] * 2");
}

TEST(RowOps, IrDumpBeforeAndAfterActions) {
    const Program p = naive(make_reduce(ReduceKind::Max, 4, 8, 16));
    EXPECT_EQ(dump(p),
              "for m in 4 : L0 <<<<<< cursor\n"
              " for r in 8 : L1\n"
              "  for n in 16 : L2\n"
              "   Y[m, n] = max(Y[m, n], X[m, r, n])\n");
    const Program q = apply_all(p, "down, down, split_8, down, vectorize, up, up, swap_down");
    EXPECT_EQ(dump(q),
              "for m in 4 : L0\n"
              " for n in 2 : L1\n"
              "  for r in 8 : L2 <<<<<< cursor\n"
              "   for n' in 8 : L3 [vectorize]\n"
              "    Y[m, n] = max(Y[m, n], X[m, r, n])\n");
    EXPECT_EQ(serialize(parse_program(serialize(q), "q")), serialize(q));
}

TEST(RowOps, StatementsWhoseResultDependsOnLoopOrderAreRejected) {
    auto parse_stmt = [](const std::string &stmt) {
        return parse_program(
            "looptool-program 1\nname s\nvar i 2\nvar j 3\ntensor X input 2 3\n"
            "tensor T temp 2\ntensor U temp 2\ntensor Y output 2\nstmt " +
                stmt +
                "\nstmt Y[i] = T[i]\nnest 0\nloop i 2 0\nloop j 3 0\n"
                "nest 1\nloop i 2 0\ncursor 0\n",
            "s.lt");
    };
    // `=` over j: each element overwritten 3 times (the reference used to sum them).
    EXPECT_THROW(
        {
            try {
                parse_stmt("T[i] = X[i, j]");
            } catch (const Error &e) {
                EXPECT_NE(std::string(e.what()).find("iterates over j, which the output does not "
                                                     "use"),
                          std::string::npos)
                    << e.what();
                throw;
            }
        },
        Error);
    // A running max whose term reads the output is not a reduction.
    EXPECT_THROW(parse_stmt("T[i] = max(T[i], T[i] + X[i, j])"), Error);
    EXPECT_THROW(parse_stmt("T[i] += T[i] * X[i, j]"), Error);
    // Two kinds into one tensor would need two identities.
    Computation c = make_reduce(ReduceKind::Max, 2, 3, 4);
    c.stmts.push_back(c.stmts[0]);
    c.stmts.back().reduce = ReduceKind::Min;
    EXPECT_THROW(c.validate(), Error);
}

// X = [[3, -1, 7], [-2, -5, -4]]: max [7, -2], min [-1, -5], by hand.
TEST(RowOps, InterpreterAndReferenceGiveTheHandComputedMaxAndMin) {
    const Program p = parse_program(kRowMaxMin, "rows");
    Buffers in = make_buffers(*p.comp, 1);
    in.data[0] = {3, -1, 7, -2, -5, -4};
    Buffers ref = in;
    run_reference(*p.comp, ref);
    Buffers sched = in;
    fill_non_inputs(*p.comp, sched, std::numeric_limits<float>::quiet_NaN());
    run_schedule(p, sched);  // starts the outputs at -inf/+inf itself
    for (const Buffers *b : {&ref, &sched}) {
        EXPECT_EQ(b->data[1][0], 7.0f);
        EXPECT_EQ(b->data[1][1], -2.0f);
        EXPECT_EQ(b->data[2][0], -1.0f);
        EXPECT_EQ(b->data[2][1], -5.0f);
    }
    // Terms read from the inputs are exact, so the bound is 0: the max must be exact.
    const Reference want = compute_reference(*p.comp, in);
    for (const auto &o : want.outputs)
        for (double e : o.bound) EXPECT_EQ(e, 0.0);
    Buffers off = sched;
    off.data[1][0] = std::nextafter(7.0f, 8.0f);
    const Comparison c = compare_outputs(*p.comp, want, off);
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.mismatches, 1);
}

TEST(RowOps, AnEmptyMaxIsMinusInfinityAndNaNTermsAreSkipped) {
    const Program p = parse_program(kRowMaxMin, "rows");
    Buffers in = make_buffers(*p.comp, 1);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    in.data[0] = {nan, 2, nan, nan, nan, nan};
    const Reference want = compute_reference(*p.comp, in);
    EXPECT_EQ(want.outputs[0].value[0], 2.0);
    EXPECT_EQ(want.outputs[0].value[1], -double(kInf));  // every term NaN: the identity
    auto jit = Jit::create();
    for (const char *actions : {"", "down, vectorize"}) {
        const Program q = apply_all(p, actions);
        Buffers got = in;
        fill_non_inputs(*q.comp, got, nan);
        const int32_t cancel = 0;
        jit->compile(q).fn(got.pointers().data(), &cancel);
        const Comparison c = compare_outputs(*q.comp, want, got);
        EXPECT_TRUE(c.ok) << actions << ": " << c.first_mismatch;
        EXPECT_EQ(got.data[1][1], -kInf);
        EXPECT_EQ(got.data[2][1], kInf);
    }
}

// The lowering: register tiles start at the identity (no memory pass), their vectorized loops
// compare and select (reduce_step), and a reduction var vectorized is a horizontal max/min in
// halves, not llvm.vector.reduce (a chain of one maxnum per lane on x86).
TEST(RowOps, TheLoweringStartsTilesAtTheIdentityAndVectorizes) {
    const Program p = naive(make_reduce(ReduceKind::Max, 4, 8, 16));
    // n split by 8 and vectorized, r innermost but one and unrolled: a register tile over r.
    const Program tiled = apply_all(p, "down, down, split_8, down, vectorize, up, up, swap_down");
    LoweredIR ir = lower_to_llvm_ir(tiled);
    EXPECT_GE(ir.summary.register_tiles, 1) << ir.ir;
    EXPECT_GE(ir.summary.zero_start_tiles, 1);
    EXPECT_TRUE(ir.summary.zeroed_tensors.empty());
    EXPECT_NE(ir.ir.find("fcmp ogt <8 x float>"), std::string::npos);
    EXPECT_NE(ir.ir.find("0xFFF0000000000000"), std::string::npos);  // -inf, the start
    // The reduction var vectorized: a horizontal max of partial results.
    const Program hr =
        apply_all(naive(make_reduce(ReduceKind::Min, 4, 8, 2)), "down, swap_down, vectorize");
    ir = lower_to_llvm_ir(hr);
    EXPECT_EQ(ir.ir.find("llvm.vector.reduce.fmin"), std::string::npos) << dump(hr);
    EXPECT_NE(ir.ir.find("shufflevector <8 x float>"), std::string::npos) << dump(hr);
    // The naive nest accumulates in memory: the output is filled with +inf at entry.
    ir = lower_to_llvm_ir(naive(make_reduce(ReduceKind::Min, 4, 8, 16)));
    EXPECT_EQ(ir.summary.zeroed_tensors.size(), 1u);
    EXPECT_NE(ir.ir.find("0x7FF0000000000000"), std::string::npos);
    auto jit = Jit::create();
    for (const Program *q : {&tiled, &hr}) EXPECT_TRUE(tests::matches_reference(*jit, *q));
}

// A max that starts from a stored value: a NaN there is skipped as one more term, even when
// every term is NaN (maxnum(NaN, NaN) is NaN), in memory, in a horizontal max and in a register
// tile (whose compare-and-select accumulators must not start from it).
TEST(RowOps, AMaxTileStartingFromAStoredNaNSkipsIt) {
    const Program p = parse_program(R"(looptool-program 1
name nanstart
var i 3
var j 37
tensor A input 3
tensor X input 3 37
tensor M output 3
stmt M[i] = A[i]
stmt M[i] = max(M[i], X[i, j])
nest 0
loop i 3 0
nest 1
loop i 3 0
loop j 37 0
cursor 0
)",
                                    "nanstart");
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Buffers in = make_buffers(*p.comp, 5);
    in.data[0] = {nan, nan, 7.0f};
    for (int j = 0; j < 37; ++j) {
        in.data[1][size_t(j)] = j % 3 ? nan : float(j % 11) - 20;  // row 0: NaN among terms
        in.data[1][size_t(37 + j)] = nan;                          // row 1: every term NaN
    }
    const Reference want = compute_reference(*p.comp, in);
    EXPECT_EQ(want.outputs[0].value[0], -10.0);
    EXPECT_EQ(want.outputs[0].value[1], -double(kInf));
    auto jit = Jit::create();
    for (const char *actions :
         {"", "down, down, vectorize", "down, down, split_16, down, vectorize",
          "down, down, split_8, down, vectorize, up, unroll"}) {
        const Program q = apply_all(p, actions);
        Buffers got = in;
        const int32_t cancel = 0;
        jit->compile(q).fn(got.pointers().data(), &cancel);
        const Comparison c = compare_outputs(*q.comp, want, got);
        EXPECT_TRUE(c.ok) << actions << ": " << c.first_mismatch;
        EXPECT_EQ(got.data[2][1], -kInf) << actions;
    }
}

TEST(RowOps, CopyElisionComputesTheMaxStraightIntoTheOutput) {
    const Program p = naive(make_reduce(ReduceKind::Max, 5, 7, 17, true, true));
    LoweredIR ir = lower_to_llvm_ir(p);
    EXPECT_TRUE(ir.summary.copy_elided);
    auto jit = Jit::create();
    EXPECT_TRUE(tests::matches_reference(*jit, p));
    EXPECT_TRUE(
        tests::matches_reference(*jit, apply_all(p, "down, down, split_8, down, vectorize")));
}

// Random legal action sequences (layout actions included) over every reduction kind, with and
// without a temporary and a product, and over softmax and layernorm: the JIT kernel and the
// scheduled interpreter against the reference each time.
TEST(RowOps, RandomSchedulesOfReductionsMatchTheReference) {
    auto jit = Jit::create();
    std::mt19937_64 rng(40);
    const ActionSpace space = ActionSpace::preset("layout");
    const auto &ext = tests::awkward_extents();
    std::uniform_int_distribution<size_t> pick(0, ext.size() - 1);
    for (int i = 0; i < 60; ++i) {
        const int64_t m = ext[pick(rng)], r = ext[pick(rng)], n = ext[pick(rng) % 8];
        const ReduceKind kind = i % 3 == 0   ? ReduceKind::Max
                                : i % 3 == 1 ? ReduceKind::Min
                                             : ReduceKind::Sum;
        Computation c = i % 10 == 8   ? make_softmax(m, r)
                        : i % 10 == 9 ? make_layernorm(m, r)
                                      : make_reduce(kind, m, r, n, i % 2 == 0, i % 4 < 2);
        std::vector<Action> taken;
        const Program p = tests::random_walk(naive(std::move(c)), rng, 12, space, &taken);
        SCOPED_TRACE(p.comp->name + " after " +
                     fmt::format("{}", fmt::join(action_names(taken), ",")));
        EXPECT_TRUE(tests::matches_reference(*jit, p, uint64_t(i)));
        const Comparison s = verify_schedule(p, uint64_t(i));
        EXPECT_TRUE(s.ok) << s.first_mismatch;
    }
}

TEST(RowOps, TheRandomScheduleCheckCoversTheReductionPrograms) {
    auto jit = Jit::create();
    ScheduleCheckOptions o;
    o.sequences = 100;
    o.seed = 41;
    o.max_volume = 1 << 15;
    o.space = "layout";
    o.programs = "reductions";
    const ScheduleCheckResult r = check_random_schedules(o, *jit);
    EXPECT_EQ(r.sequences, 100);
    EXPECT_GT(r.distinct_shapes, 30);
    for (const auto &f : r.failures) ADD_FAILURE() << f;
    EXPECT_TRUE(r.ok());
    o.programs = "stencils";
    EXPECT_THROW(check_random_schedules(o, *jit), Error);
}

// The files of datasets/normalization parse to the programs row_ops.h builds (up to the
// constants' spelling) and verify, naive and scheduled.
TEST(RowOps, TheDatasetProgramsVerify) {
    const std::string dir = std::string(LOOPTUNE_DATASETS_DIR) + "/normalization/";
    auto jit = Jit::create();
    for (const char *name : {"softmax1536_128", "layernorm128_768"}) {
        SCOPED_TRACE(name);
        const Program p = load_program_file(dir + name);
        EXPECT_EQ(p.comp->name, name);
        const Computation built = std::string(name).starts_with("softmax")
                                      ? make_softmax(1536, 128)
                                      : make_layernorm(128, 768);
        EXPECT_EQ(serialize(p), serialize(Program::naive(std::make_shared<Computation>(built))));
        EXPECT_TRUE(tests::matches_reference(*jit, p));
        EXPECT_TRUE(
            tests::matches_reference(*jit, apply_all(p, "down, split_16, down, vectorize")));
    }
}

}  // namespace
}  // namespace looptool
