#include "looptool/ir/ir.h"

#include <gtest/gtest.h>

#include "looptool/ir/error.h"

using namespace looptool;

TEST(Ir, MatmulHasLoopTuneShapeAndFlops) {
    Computation c = make_matmul(64, 128, 32);
    EXPECT_EQ(c.name, "mm64_128_32");
    ASSERT_EQ(c.vars.size(), 3u);
    EXPECT_EQ(c.vars[0].name, "m");
    EXPECT_EQ(c.vars[1].name, "k");
    EXPECT_EQ(c.vars[2].name, "n");
    EXPECT_EQ(c.tensors[0].shape, (std::vector<int64_t>{64, 32}));   // A is m x k
    EXPECT_EQ(c.tensors[1].shape, (std::vector<int64_t>{32, 128}));  // B is k x n
    // 2*m*n*k for the reduction; the write of T to C counts no FLOPs.
    EXPECT_DOUBLE_EQ(c.flops(), 2.0 * 64 * 128 * 32);
    EXPECT_EQ(format_stmt(c, c.stmts[0]), "T[m, n] += A[m, k] * B[k, n]");
}

TEST(Ir, ConvIsExpressibleWithAffineIndices) {
    Computation c = make_conv2d(1, 3, 8, 8, 4, 3, 3);
    EXPECT_EQ(format_stmt(c, c.stmts[0]),
              "T[n, m, ho, wo] += X[n, c, ho+kh, wo+kw] * W[m, c, kh, kw]");
}

TEST(Ir, AbsurdSizesAreRejected) {
    EXPECT_THROW(make_matmul(1 << 20, 1 << 20, 4), Error);
    EXPECT_THROW(make_matmul(0, 4, 4), Error);
}

namespace {
std::string validate_error(const Computation &c) {
    try {
        c.validate();
    } catch (const Error &e) {
        return e.what();
    }
    return "<no error>";
}
}  // namespace

TEST(Ir, ValidateNamesTheFirstInconsistency) {
    Computation good = make_matmul(4, 5, 6);
    EXPECT_EQ(validate_error(good), "<no error>");
    Computation c = good;
    c.stmts[0].value.args[0].access.index[1].offset = 1;  // A[m, k+1] runs past k = 6
    EXPECT_NE(validate_error(c).find("ranges over [1, 6] but the dimension has size 6"),
              std::string::npos)
        << validate_error(c);
    c = good;
    c.stmts[0].value.args[1].access.tensor = 9;
    EXPECT_NE(validate_error(c).find("unknown tensor id 9"), std::string::npos);
    c = good;
    c.stmts[1].out.tensor = 0;  // writes A
    EXPECT_NE(validate_error(c).find("writes input tensor A"), std::string::npos);
    c = good;
    c.stmts[1].value.access.tensor = 3;  // reads C
    EXPECT_NE(validate_error(c).find("reads output tensor C"), std::string::npos);
    c = good;
    c.vars[1].extent = 0;
    EXPECT_NE(validate_error(c).find("variable k has extent 0"), std::string::npos);
    c = good;
    c.tensors[0].shape = {int64_t(1) << 16, int64_t(1) << 16};  // 2^32 elements
    EXPECT_NE(validate_error(c).find("above the limit of 2^31"), std::string::npos);
    c = good;
    c.stmts[0].value.args.pop_back();
    EXPECT_NE(validate_error(c).find("mul takes 2 operands, got 1"), std::string::npos);
    c = good;
    c.stmts.clear();
    EXPECT_NE(validate_error(c).find("no statements"), std::string::npos);
}

TEST(Ir, ConvFlopsShapesAndErrors) {
    Computation c = make_conv2d(1, 3, 8, 8, 4, 3, 3);
    EXPECT_EQ(c.name, "conv1_3_8_8__4_3_3_3");
    EXPECT_EQ(c.tensors[3].shape, (std::vector<int64_t>{1, 4, 6, 6}));
    EXPECT_DOUBLE_EQ(c.flops(), 2.0 * 1 * 4 * 6 * 6 * 3 * 3 * 3);
    EXPECT_THROW(make_conv2d(1, 3, 2, 8, 4, 3, 3), Error);  // kernel taller than the image
    EXPECT_EQ(c.stmt_vars(0), (std::vector<int>{0, 6, 2, 3, 1, 4, 5}));  // output vars first
}

TEST(Ir, ElementwiseAndAffineFormatting) {
    Computation c = make_elementwise_add(3, 5);
    EXPECT_EQ(format_stmt(c, c.stmts[0]), "C[m, n] = A[m, n] + B[m, n]");
    EXPECT_DOUBLE_EQ(c.flops(), 15.0);
    EXPECT_EQ(format_affine(c, Affine{{{0, 2}, {1, -1}}, -3}), "2*m-n-3");
    EXPECT_EQ(format_affine(c, Affine{{{0, -1}}, 4}), "-m+4");
    EXPECT_EQ(format_affine(c, Affine{{}, 0}), "0");
    EXPECT_EQ((Affine{{{0, 2}, {1, 1}, {0, 3}}, 0}.coef_of(0)), 5);
    EXPECT_EQ(c.var_index("n"), 1);
    EXPECT_EQ(c.var_index("q"), -1);
    EXPECT_EQ(c.tensor_index("B"), 1);
}

// An access reaches every element of its tensor once when each dimension is its own vars in
// mixed radix: a plain var (an identity cover), or a var `pack` cut in two.
TEST(Ir, ExactCoversIncludeVarsCutInTwo) {
    Computation c = make_matmul(64, 128, 32);
    const Access out = c.stmts[0].out;  // T[m, n]
    EXPECT_TRUE(is_identity_cover(c, out));
    EXPECT_TRUE(is_exact_cover(c, out));
    // n = 32 * n_o + n_i, as pack leaves it (n_o: 4, n_i: 32).
    c.vars.push_back({"n_o", 4});
    c.vars.push_back({"n_i", 32});
    const int no = int(c.vars.size()) - 2, ni = int(c.vars.size()) - 1;
    Access cut = out;
    cut.index[1] = Affine{{{no, 32}, {ni, 1}}, 0};
    EXPECT_FALSE(is_identity_cover(c, cut));
    EXPECT_TRUE(is_exact_cover(c, cut));
    Access overlap = cut;  // 16 * n_o + n_i: elements 16..63 twice, 112..127 never
    overlap.index[1] = Affine{{{no, 16}, {ni, 1}}, 0};
    EXPECT_FALSE(is_exact_cover(c, overlap));
    Access shifted = cut;  // one past: the last element out of range, the first never
    shifted.index[1].offset = 1;
    EXPECT_FALSE(is_exact_cover(c, shifted));
    c.vars.push_back({"m2", 2});
    Access twice = cut;  // [2 * n_i + m2, 32 * n_o + n_i]: n_i in both dimensions
    twice.index[0] = Affine{{{ni, 2}, {int(c.vars.size()) - 1, 1}}, 0};
    EXPECT_FALSE(is_exact_cover(c, twice));
    twice.index[1] = Affine::of_var(c.var_index("n"));  // [2 * n_i + m2, n]: each element once
    EXPECT_TRUE(is_exact_cover(c, twice));
}
