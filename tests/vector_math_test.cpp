// exp, log, tanh and erf: the ops, their error bound, and the lowering's calls of glibc's
// libmvec (lower_math.h) on vectors, checked against the reference and against libm's scalars.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "baselines/onednn_rowop.h"
#include "looptool/check/verify.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"
#include "looptool/jit/export.h"
#include "looptool/lower/lower.h"
#include "tests/test_util.h"
#include "util/machine.h"

namespace looptool {
namespace {

// Four functions of four inputs, each over a range that reaches its hard cases (exp's
// underflow and overflow edges, log near 1 and of tiny values, tanh's and erf's saturation).
const char *kFunctions = R"(looptool-program 1
name funcs
var i 4099
tensor A input 4099
tensor B input 4099
tensor C input 4099
tensor D input 4099
tensor E output 4099
tensor L output 4099
tensor T output 4099
tensor F output 4099
stmt E[i] = exp(A[i])
stmt L[i] = log(B[i])
stmt T[i] = tanh(C[i])
stmt F[i] = erf(D[i])
nest 0
loop i 4099 0
nest 1
loop i 4099 0
nest 2
loop i 4099 0
nest 3
loop i 4099 0
cursor 0
)";

Program apply_all(Program p, const std::string &actions) {
    for (Action a : parse_action_list(actions)) p = apply(p, a);
    return p;
}

// Inputs spread over each function's range, its ends included.
Buffers sweep_inputs(const Computation &c) {
    Buffers b = make_buffers(c, 3);
    const double lo[4] = {-103, 1e-30, -12, -6}, hi[4] = {88.5, 1e30, 12, 6};
    for (int f = 0; f < 4; ++f) {
        auto &v = b.data[size_t(f)];
        for (size_t i = 0; i < v.size(); ++i) {
            const double t = double(i) / double(v.size() - 1);
            v[i] = f == 1
                       ? float(std::exp(std::log(lo[1]) + t * (std::log(hi[1]) - std::log(lo[1]))))
                       : float(lo[f] + t * (hi[f] - lo[f]));
        }
    }
    return b;
}

Comparison run_checked(Jit &jit, const Program &p, const Buffers &in) {
    const Reference want = compute_reference(*p.comp, in);
    Buffers got = in;
    fill_non_inputs(*p.comp, got, std::numeric_limits<float>::quiet_NaN());
    const int32_t cancel = 0;
    jit.compile(p).fn(got.pointers().data(), &cancel);
    return compare_outputs(*p.comp, want, got);
}

// Every nest's loop split by `w` and its inner loop vectorized: `w`-lane vectors, a tail of
// 4099 mod w.
Program vectorized(const Program &p, int w) {
    std::string a;
    for (size_t n = 0; n < p.tree.nests.size(); ++n)
        a += fmt::format("{}split_{}, down, vectorize", n ? ", down, " : "", w);
    return apply_all(p, a);
}

TEST(VectorMath, TanhAndErfParsePrintAndInterpret) {
    const Program p = parse_program(kFunctions, "funcs");
    EXPECT_EQ(p.comp->stmts[2].value.op, OpKind::Tanh);
    EXPECT_EQ(p.comp->stmts[3].value.op, OpKind::Erf);
    EXPECT_EQ(format_stmt(*p.comp, p.comp->stmts[3]), "F[i] = erf(D[i])");
    EXPECT_EQ(serialize(parse_program(serialize(p), "again")), serialize(p));
    Buffers b = make_buffers(*p.comp, 1);
    b.data[2][0] = 0.5f;
    b.data[3][0] = 0.5f;
    run_schedule(p, b);
    EXPECT_FLOAT_EQ(b.data[6][0], std::tanh(0.5f));
    EXPECT_FLOAT_EQ(b.data[7][0], std::erf(0.5f));
}

// On vectors the lowering calls libmvec at the widest width the CPU has (detected, not
// assumed), exp excepted (inline code), on scalars libm with the variants named for the loop
// vectorizer.
TEST(VectorMath, VectorsCallLibmvecAtTheCpusWidth) {
    auto jit = Jit::create();
    const Program p = vectorized(parse_program(kFunctions, "funcs"), 16);
    const std::string ir = jit->llvm_ir(p);
    const char *isa = __builtin_cpu_supports("avx512f") ? "e"
                      : __builtin_cpu_supports("avx2")  ? "d"
                                                        : "b";
    const int w = *isa == 'e' ? 16 : *isa == 'd' ? 8 : 4;
    for (const char *fn : {"logf", "tanhf", "erff"})
        EXPECT_NE(ir.find(fmt::format("call <{} x float> @_ZGV{}N{}v_{}", w, isa, w, fn)),
                  std::string::npos)
            << fn << "\n"
            << ir;
    EXPECT_EQ(ir.find("v_expf("), std::string::npos) << ir;
    const std::string scalar = jit->llvm_ir(parse_program(kFunctions, "funcs"));
    EXPECT_NE(scalar.find("call float @tanhf"), std::string::npos) << scalar;
    EXPECT_NE(scalar.find("vector-function-abi-variant"), std::string::npos) << scalar;
    // Without libmvec the vector is computed lane by lane with libm.
    JitOptions o;
    o.vector_math = false;
    const std::string plain = Jit::create(o)->llvm_ir(p);
    EXPECT_EQ(plain.find("_ZGV"), std::string::npos);
    EXPECT_NE(plain.find("call float @erff"), std::string::npos);
}

// The vector path at many widths (4099 leaves tails of 3, padded; wide vectors take several
// calls) and libm's scalars
// both stay within the checker's bound of the double reference over the whole sweep.
TEST(VectorMath, TheVectorPathAndScalarLibmStayWithinTheBound) {
    auto vec = Jit::create();
    JitOptions o;
    o.vector_math = false;
    auto scalar = Jit::create(o);
    const Program p = parse_program(kFunctions, "funcs");
    const Buffers in = sweep_inputs(*p.comp);
    for (int w : {1, 2, 4, 8, 16, 32, 64}) {
        SCOPED_TRACE(w);
        const Program q = w == 1 ? p : vectorized(p, w);
        for (Jit *j : {vec.get(), scalar.get()}) {
            const Comparison c = run_checked(*j, q, in);
            EXPECT_TRUE(c.ok) << c.first_mismatch;
            EXPECT_EQ(c.unbounded, 0);
        }
    }
}

// The inline vector exp at its edges: infinities, NaN, overflow, the subnormal results and
// the underflow to 0 are std::exp's, and every finite element is within the bound.
TEST(VectorMath, TheInlineExpKeepsTheEdgesOfExp) {
    const float kInf = std::numeric_limits<float>::infinity(), kNaN = std::nanf("");
    const std::vector<float> xs = {
        -kInf,   kInf,    kNaN,    -kNaN,   0.0f,  -0.0f,  88.72f, 88.73f, 89.0f,   100.0f, -87.3f,
        -100.0f, -103.9f, -104.0f, -200.0f, 1e-8f, -1e-8f, 0.5f,   -0.5f,  0.3465f, 20.0f,  -20.0f};
    const Program p = apply_all(parse_program(kFunctions, "funcs"), "split_16, down, vectorize");
    Buffers in = sweep_inputs(*p.comp);
    for (size_t i = 0; i < xs.size(); ++i) in.data[0][i] = xs[i];
    // With the target's vector math (vscalefps on AVX-512) and without (2^k built in integers).
    for (bool vector_math : {true, false}) {
        JitOptions o;
        o.vector_math = vector_math;
        auto jit = Jit::create(o);
        Buffers got = in;
        const int32_t cancel = 0;
        jit->compile(p).fn(got.pointers().data(), &cancel);
        for (size_t i = 0; i < xs.size(); ++i) {
            const float want = std::exp(xs[i]), y = got.data[4][i];
            SCOPED_TRACE(
                fmt::format("exp({}) = {}, libm {}, vector math {}", xs[i], y, want, vector_math));
            if (std::isnan(want) || std::isinf(want) || want == 0) {
                EXPECT_EQ(std::isnan(y), std::isnan(want));
                if (!std::isnan(want)) EXPECT_EQ(y, want);
            } else {
                EXPECT_NEAR(y, want, 4 * std::abs(want) * 0x1p-23f + 0x1p-149f);
            }
        }
        // Within the checker's bound wherever the reference has one (overflowing elements have
        // none).
        Buffers bounded = in;
        for (size_t i = 0; i < xs.size(); ++i)
            if (!std::isfinite(xs[i]) || xs[i] > 88.5f) bounded.data[0][i] = 0;
        const Comparison c = run_checked(*jit, p, bounded);
        EXPECT_TRUE(c.ok) << c.first_mismatch;
    }
}

// The inline vector exp over its whole range, 16 grids of 4099 points offset from each other:
// within 2 ulp of exp in double wherever the result is a normal float (the table of 2^(j/16)
// with AVX-512 within 1.1 ulp, Cephes' polynomial otherwise within 2), and both its paths.
TEST(VectorMath, TheInlineExpIsWithinTwoUlpOverItsRange) {
    const Program p = apply_all(parse_program(kFunctions, "funcs"), "split_16, down, vectorize");
    for (bool vector_math : {true, false}) {
        JitOptions o;
        o.vector_math = vector_math;
        auto jit = Jit::create(o);
        const KernelFn fn = jit->compile(p).fn;
        Buffers b = sweep_inputs(*p.comp);
        double worst = 0;
        for (int g = 0; g < 16; ++g) {
            for (size_t i = 0; i < b.data[0].size(); ++i)
                b.data[0][i] = float(-103.0 + (double(i) + g / 16.0) * (191.7 / 4099.0));
            const int32_t cancel = 0;
            fn(b.pointers().data(), &cancel);
            for (size_t i = 0; i < b.data[0].size(); ++i) {
                const double want = std::exp(double(b.data[0][i]));
                if (want < 0x1p-126 || want > 0x1p127) continue;
                const double ulp = std::ldexp(1.0, std::ilogb(float(want)) - 23);
                worst = std::max(worst, std::abs(double(b.data[4][i]) - want) / ulp);
            }
        }
        EXPECT_LE(worst, 2.0) << "vector math " << vector_math;
    }
}

// A plain loop is widened by LLVM's loop vectorizer to libmvec's variants: in the exported
// object's IR (the JIT's pipeline) the calls are vector calls.
TEST(VectorMath, TheLoopVectorizerWidensScalarCallsToLibmvec) {
    for (bool tanh_form : {false, true}) {
        const Program p =
            Program::naive(std::make_shared<Computation>(make_gelu(32, 64, tanh_form)));
        const ExportedKernel k = export_kernel(p);
        EXPECT_NE(k.ir.find(fmt::format("@_ZGV")), std::string::npos) << k.ir;
        EXPECT_NE(k.header.find("-lmvec"), std::string::npos) << k.header;
        auto jit = Jit::create();
        EXPECT_TRUE(tests::matches_reference(*jit, p));
    }
}

// Random legal action sequences over GELU (both forms), softmax and layernorm at awkward
// sizes: the JIT kernel and the scheduled interpreter against the reference, every element
// bounded.
TEST(VectorMath, RandomSchedulesOfTheTranscendentalProgramsMatchTheReference) {
    auto jit = Jit::create();
    std::mt19937_64 rng(44);
    const ActionSpace space = ActionSpace::preset("full");
    const auto &ext = tests::awkward_extents();
    std::uniform_int_distribution<size_t> pick(0, ext.size() - 1);
    for (int i = 0; i < 48; ++i) {
        const int64_t m = ext[pick(rng)], n = ext[pick(rng)];
        Computation c = i % 4 == 0   ? make_softmax(m, n)
                        : i % 4 == 1 ? make_layernorm(m, n)
                                     : make_gelu(m, n, i % 4 == 2);
        std::vector<Action> taken;
        const Program p = tests::random_walk(Program::naive(std::make_shared<Computation>(c)), rng,
                                             12, space, &taken);
        SCOPED_TRACE(p.comp->name + " after " +
                     fmt::format("{}", fmt::join(action_names(taken), ",")));
        EXPECT_TRUE(tests::matches_reference(*jit, p, uint64_t(i)));
        const Comparison s = verify_schedule(p, uint64_t(i));
        EXPECT_TRUE(s.ok) << s.first_mismatch;
        EXPECT_EQ(s.unbounded, 0);
    }
}

TEST(VectorMath, GenerateWritesRowOperationsThatReadBackAndVerify) {
    tests::TempDir dir("gen_rowops");
    auto jit = Jit::create();
    const std::vector<std::string> kinds = {"softmax", "layernorm", "gelu", "gelu-tanh"};
    for (const std::string &kind : kinds) {
        const auto paths = write_rowop_dataset(kind, "3|8,17", (dir.path / kind).string());
        ASSERT_EQ(paths.size(), 2u);
        const Program p = load_program_file(paths[1]);
        const Computation want = kind == "softmax"     ? make_softmax(8, 17)
                                 : kind == "layernorm" ? make_layernorm(8, 17)
                                                       : make_gelu(8, 17, kind == "gelu-tanh");
        EXPECT_EQ(*p.comp, want);
        EXPECT_TRUE(tests::matches_reference(*jit, p));
        EXPECT_TRUE(tests::matches_reference(*jit, apply_all(p, "down, split_8, down, vectorize")));
    }
    EXPECT_THROW(write_rowop_dataset("conv", "3,4", dir.path.string()), Error);
    EXPECT_THROW(write_rowop_dataset("softmax", "3", dir.path.string()), Error);
    EXPECT_THROW(write_rowop_dataset("softmax", "3,0", dir.path.string()), Error);
}

// oneDNN's softmax and layer_normalization and the streaming copy: each checked against the
// reference (or X) before it is timed, and refused on another op.
TEST(VectorMath, TheRowOperationReferencesRunCheckedOnTheirOps) {
    namespace lb = looptune::bench;
    const Computation soft = make_softmax(24, 40), norm = make_layernorm(16, 48),
                      gelu = make_gelu(8, 16);
    EXPECT_TRUE(lb::is_softmax(soft));
    EXPECT_TRUE(lb::is_layernorm(norm));
    EXPECT_FALSE(lb::is_softmax(norm));
    EXPECT_TRUE(lb::rowop_method_runs_on(lb::kStreamingCopy, gelu));
    EXPECT_FALSE(lb::rowop_method_runs_on(lb::kOnednnSoftmax, gelu));
    EXPECT_FALSE(lb::rowop_method_runs_on(lb::kStreamingCopy, make_matmul(4, 4, 4)));
    EXPECT_GT(lb::rowop_measurer("soft", lb::kOnednnSoftmax, soft)(), 0);
    EXPECT_GT(lb::rowop_measurer("norm", lb::kOnednnLayernorm, norm)(), 0);
    EXPECT_GT(lb::rowop_measurer("gelu", lb::kStreamingCopy, gelu)(), 0);
    EXPECT_THROW(lb::rowop_measurer("norm", lb::kOnednnSoftmax, norm), Error);
    EXPECT_DOUBLE_EQ(lb::rowop_min_bytes(norm), 4.0 * (2 * 16 * 48 + 2 * 48));
}

// The copy past half the last-level cache takes its non-temporal path: every element copied
// whatever y's alignment and n's tail, nothing written past n.
TEST(VectorMath, TheStreamingCopyPastTheCacheCopiesAtAnyAlignment) {
    const int64_t n = looptune::cache_sizes().llc / 2 / 4 + 37;
    std::vector<float> x(size_t(n + 16)), y(size_t(n + 16));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 1000) + 0.5f;
    for (int64_t shift : {0, 1, 7}) {
        std::fill(y.begin(), y.end(), -1.0f);
        looptune::bench::streaming_copy(x.data() + shift, y.data() + shift, n);
        int64_t wrong = 0;
        for (int64_t i = 0; i < n; ++i) wrong += y[size_t(i + shift)] != x[size_t(i + shift)];
        EXPECT_EQ(wrong, 0) << "shift " << shift;
        EXPECT_EQ(y[size_t(n + shift)], -1.0f);
        if (shift > 0) {
            EXPECT_EQ(y[size_t(shift - 1)], -1.0f);
        }
    }
}

}  // namespace
}  // namespace looptool
