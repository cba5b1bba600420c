// Verification against the double-precision reference with a forward error bound
// (looptool/check/verify.h, docs/measurement.md): the bound on a hand-checked dot product, no false
// mismatch on long reductions (naive and tuned, interpreter and JIT), wrong kernels still
// caught, NaN/Inf compared as classes, sampling on large problems.
#include "looptool/check/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "looptool/actions/actions.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "tests/test_util.h"

namespace looptool {
namespace {

using tests::matmul_program;

constexpr double kU = 0x1p-24 + 0x1p-53;  // as in verify.cpp: float's and the reference's roundoff

// Tuned schedules for 8 x 16 x k: m split by 4 with n vectorized by 8; k split by 64 (a tail
// unless 64 divides k) with its inner loop innermost, so each element sums in another order.
const char *kTuned = "split_4, down, down, down, split_8, down, vectorize";
const char *kSplitK = "down, split_64, down, swap_down";

Program apply_all(Program p, const std::string &actions) {
    for (Action a : parse_action_list(actions)) p = apply(p, a);
    return p;
}

// Runs p's JIT kernel on the inputs of `inputs`, every other tensor starting as NaN.
Buffers run_jit(Jit &jit, const Program &p, const Buffers &inputs) {
    Buffers got = inputs;
    fill_non_inputs(*p.comp, got, std::numeric_limits<float>::quiet_NaN());
    const int32_t cancel = 0;
    jit.compile(p).fn(got.pointers().data(), &cancel);
    return got;
}

Buffers run_interpreter(const Program &p, const Buffers &inputs) {
    Buffers got = inputs;
    run_schedule(p, got);
    return got;
}

TEST(Verify, TheBoundOfAHandCheckedDotProduct) {
    Program p = matmul_program(1, 1, 3);
    Buffers b = make_buffers(*p.comp, 1);
    b.data[0] = {1, 2, 3};         // A
    b.data[1] = {0.5f, 0.25f, 2};  // B: products 0.5, 0.5, 6 (exact)
    const Reference r = compute_reference(*p.comp, b);
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].value[0], 7.0);
    // Each product rounds once (u |a b|, plus the underflow term 2^-149); the sum of 3 terms
    // in any order is within gamma_2 = 2u / (1 - 2u) of the sum of magnitudes; C = T copies.
    const double E = kU * 7 + 3 * 0x1p-149;
    const double want = 2 * kU / (1 - 2 * kU) * (7 + E) + E;
    EXPECT_NEAR(r.outputs[0].bound[0], want, 1e-12 * want);
    EXPECT_FALSE(r.sampled());
}

TEST(Verify, LongReductionsOfCorrectKernelsNeverMismatch) {
    auto jit = Jit::create();
    for (int64_t k : {1000, 8192, 65536}) {
        Program naive = matmul_program(8, 16, k);
        Program tile = apply_all(naive, kTuned);
        Program ksplit = apply_all(naive, kSplitK);
        Buffers in = make_buffers(*naive.comp, uint64_t(k));
        const Reference want = compute_reference(*naive.comp, in);
        ASSERT_FALSE(want.sampled());
        for (const Program *p : {&naive, &tile, &ksplit}) {
            Comparison j = compare_outputs(*p->comp, want, run_jit(*jit, *p, in));
            EXPECT_TRUE(j.ok) << "JIT, k=" << k << ": " << j.first_mismatch << "\n" << dump(*p);
            Comparison i = compare_outputs(*p->comp, want, run_interpreter(*p, in));
            EXPECT_TRUE(i.ok) << "interpreter, k=" << k << ": " << i.first_mismatch << "\n"
                              << dump(*p);
            EXPECT_EQ(j.checked, 8 * 16);
            EXPECT_EQ(j.unbounded, 0);
        }
    }
}

TEST(Verify, AKernelThatDropsOneTermIsCaught) {
    // A real wrong kernel: C[2,3] misses the term of one k. The bound at k = 256 is ~1e-3 of a
    // result of magnitude ~10, far below the largest term it drops.
    Program p = matmul_program(4, 8, 256);
    Buffers in = make_buffers(*p.comp, 3);
    const Reference want = compute_reference(*p.comp, in);
    Buffers got = run_interpreter(p, in);
    ASSERT_TRUE(compare_outputs(*p.comp, want, got).ok);
    const auto &A = in.data[0], &B = in.data[1];
    int64_t worst = 0;
    for (int64_t k = 0; k < 256; ++k)
        if (std::abs(A[size_t(2 * 256 + k)] * B[size_t(k * 8 + 3)]) >
            std::abs(A[size_t(2 * 256 + worst)] * B[size_t(worst * 8 + 3)]))
            worst = k;
    got.data[3][2 * 8 + 3] -= A[size_t(2 * 256 + worst)] * B[size_t(worst * 8 + 3)];
    Comparison c = compare_outputs(*p.comp, want, got);
    EXPECT_FALSE(c.ok);
    EXPECT_EQ(c.mismatches, 1);
    EXPECT_NE(c.first_mismatch.find("C[2,3]"), std::string::npos) << c.first_mismatch;
}

TEST(Verify, AnElementAFewTimesItsBoundOffIsCaughtAtK65536) {
    auto jit = Jit::create();
    Program p = apply_all(matmul_program(8, 16, 65536), kTuned);
    Buffers in = make_buffers(*p.comp, 5);
    const Reference want = compute_reference(*p.comp, in);
    Buffers got = run_jit(*jit, p, in);
    ASSERT_TRUE(compare_outputs(*p.comp, want, got).ok);
    const size_t i = 77;  // C[4,13]
    const double w = want.outputs[0].value[i], e = want.outputs[0].bound[i];
    got.data[3][i] = float(w + 0.9 * e);  // inside the bound: a correct kernel could do this
    EXPECT_TRUE(compare_outputs(*p.comp, want, got).ok);
    got.data[3][i] = float(w - 3 * e);
    Comparison c = compare_outputs(*p.comp, want, got);
    EXPECT_FALSE(c.ok);
    EXPECT_NE(c.first_mismatch.find("C[4,13]"), std::string::npos) << c.first_mismatch;
    EXPECT_NEAR(c.max_error_ratio, 3, 0.01);
    // A few ulps beyond the bound is still beyond it.
    float beyond = float(w + e);
    for (int ulp = 0; ulp < 3; ++ulp) beyond = std::nextafter(beyond, INFINITY);
    got.data[3][i] = beyond;
    EXPECT_FALSE(compare_outputs(*p.comp, want, got).ok);
    // --tolerance is a factor on the bound.
    got.data[3][i] = float(w + 1.5 * e);
    EXPECT_FALSE(compare_outputs(*p.comp, want, got, 1).ok);
    EXPECT_TRUE(compare_outputs(*p.comp, want, got, 2).ok);
}

TEST(Verify, NaNAndInfinityAreComparedAsClasses) {
    // A / Z with Z all zero: +-inf where A != 0, NaN where A == 0 (0 / 0).
    Program p = parse_program(R"(looptool-program 1
name div0
var m 2
var n 3
tensor A input 2 3
tensor Z input 2 3
tensor C output 2 3
stmt C[m, n] = A[m, n] / Z[m, n]
nest 0
loop m 2 0
loop n 3 0
cursor 0
)");
    Buffers in = make_buffers(*p.comp, 1);
    in.data[0] = {0, 1, -2, 0, 3, -4};
    in.data[1].assign(6, 0.0f);
    const Reference want = compute_reference(*p.comp, in);
    Buffers got = run_interpreter(p, in);
    ASSERT_TRUE(std::isnan(got.data[2][0]));
    Comparison c = compare_outputs(*p.comp, want, got);
    EXPECT_TRUE(c.ok) << c.first_mismatch;
    EXPECT_TRUE(compare_outputs(*p.comp, want, run_jit(*Jit::create(), p, in)).ok);
    Buffers bad = got;
    bad.data[2][1] = -INFINITY;  // wrong sign
    EXPECT_FALSE(compare_outputs(*p.comp, want, bad).ok);
    bad = got;
    bad.data[2][1] = NAN;  // NaN where the reference is +inf
    EXPECT_FALSE(compare_outputs(*p.comp, want, bad).ok);
    bad = got;
    bad.data[2][0] = 0;  // a number where the reference is NaN
    EXPECT_FALSE(compare_outputs(*p.comp, want, bad).ok);
}

TEST(Verify, AnUnwrittenElementIsCaught) {
    auto jit = Jit::create();
    Program p = matmul_program(8, 8, 8);
    Buffers in = make_buffers(*p.comp, 1);
    const Reference want = compute_reference(*p.comp, in);
    Buffers got = run_jit(*jit, p, in);
    got.data[3][5] = std::numeric_limits<float>::quiet_NaN();  // as if the kernel skipped it
    EXPECT_FALSE(compare_outputs(*p.comp, want, got).ok);
}

TEST(Verify, LargeProblemsAreSampledAndTheSampleAgreesWithTheFullReference) {
    Program p = matmul_program(32, 48, 2048);
    Buffers in = make_buffers(*p.comp, 2);
    ReferenceOptions small_budget;
    small_budget.max_terms = 2e5;  // ~97 elements of 2049 terms each
    const Reference sampled = compute_reference(*p.comp, in, small_budget);
    const Reference full = compute_reference(*p.comp, in);
    ASSERT_TRUE(sampled.sampled());
    EXPECT_EQ(sampled.total, 32 * 48);
    EXPECT_EQ(sampled.checked, int64_t(2e5 / 2049));
    const auto &s = sampled.outputs[0];
    for (size_t i = 0; i < s.index.size(); ++i) {
        EXPECT_EQ(s.value[i], full.outputs[0].value[size_t(s.index[i])]);
        EXPECT_EQ(s.bound[i], full.outputs[0].bound[size_t(s.index[i])]);
    }
    Buffers got = run_interpreter(p, in);
    Comparison c = compare_outputs(*p.comp, sampled, got);
    EXPECT_TRUE(c.ok);
    EXPECT_EQ(c.coverage(), "a random sample of 97 of 1536 output elements");
    // A wrong sampled element is caught; sampling cannot see the others.
    got.data[3][size_t(s.index[3])] += 1;
    EXPECT_FALSE(compare_outputs(*p.comp, sampled, got).ok);
    // The same seed draws the same sample.
    EXPECT_EQ(compute_reference(*p.comp, in, small_budget).outputs[0].index, s.index);
}

TEST(Verify, ToleranceMustBeFiniteAndNonNegative) {
    Program p = matmul_program(2, 2, 2);
    EXPECT_THROW(verify_schedule(p, 1, -1), Error);
    EXPECT_THROW(verify_schedule(p, 1, std::nan("")), Error);
    EXPECT_THROW(verify_schedule(p, 1, INFINITY), Error);
    EXPECT_TRUE(verify_schedule(p, 1, 1).ok);
    EXPECT_NO_THROW(verify_schedule(p, 1, 0));  // 0 demands exact agreement; allowed
}

// A divisor that is zero but inexact (a sum of products with 0, each rounded, so it may be
// any tiny number): the quotient has no bound. Such elements used to be counted as "not
// bounded" and skipped, so this kernel verified with nothing checked; now each one fails.
TEST(Verify, ADivisionByAnInexactZeroCannotBeCheckedAndFails) {
    Program p = parse_program(R"(looptool-program 1
name divz
var i 4
var j 8
tensor X input 4 8
tensor Z temp 4
tensor Y output 4 8
stmt Z[i] += X[i, j] * 0
stmt Y[i, j] = X[i, j] / Z[i]
nest 0
loop i 4 0
loop j 8 0
nest 1
loop i 4 0
loop j 8 0
cursor 0
)");
    Buffers in = make_buffers(*p.comp, 1);
    const Reference want = compute_reference(*p.comp, in);
    for (Buffers got : {run_interpreter(p, in), run_jit(*Jit::create(), p, in)}) {
        const Comparison c = compare_outputs(*p.comp, want, got);
        EXPECT_FALSE(c.ok);
        EXPECT_EQ(c.unbounded, 32);
        EXPECT_EQ(c.mismatches, 32);
        EXPECT_NE(c.first_mismatch.find("Y[0,0]: got "), std::string::npos) << c.first_mismatch;
        EXPECT_NE(c.first_mismatch.find("cannot be checked"), std::string::npos);
        EXPECT_EQ(
            c.failures(1),
            "32 of all 32 output elements fail: 32 cannot be checked (no finite error bound)");
    }
    EXPECT_FALSE(verify_schedule(p).ok);
}

// exp of a value near 200 overflows float: no bound, so the element fails whatever the kernel
// wrote, and the ones within range are still checked.
TEST(Verify, AnElementThatMayOverflowFailsAndTheRestAreChecked) {
    Program p = parse_program(R"(looptool-program 1
name ovf
var i 2
var j 3
tensor X input 2 3
tensor Y output 2 3
stmt Y[i, j] = exp(X[i, j] * 100)
nest 0
loop i 2 0
loop j 3 0
cursor 0
)");
    Buffers in = make_buffers(*p.comp, 1);
    in.data[0] = {0.5f, 0.89f, -1, 0.1f, 0.2f, 0.3f};  // exp(89) is above FLT_MAX
    const Reference want = compute_reference(*p.comp, in);
    Buffers got = run_jit(*Jit::create(), p, in);
    Comparison c = compare_outputs(*p.comp, want, got);
    EXPECT_EQ(c.unbounded, 1);
    EXPECT_EQ(c.mismatches, 1);
    EXPECT_NE(c.first_mismatch.find("Y[0,1]"), std::string::npos) << c.first_mismatch;
    got.data[1][0] *= 2;  // a checked element wrong as well
    c = compare_outputs(*p.comp, want, got);
    EXPECT_EQ(c.mismatches, 2);
    EXPECT_EQ(c.unbounded, 1);
    EXPECT_NE(c.failures(1).find("1 differ beyond 1 x the error bound, 1 cannot be checked"),
              std::string::npos)
        << c.failures(1);
}

}  // namespace
}  // namespace looptool
