#include "looptool/ir.h"

#include <gtest/gtest.h>

#include "looptool/error.h"

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
    EXPECT_EQ(format_stmt(c, c.stmts[0]), "T[n, m, ho, wo] += X[n, c, ho+kh, wo+kw] * W[m, c, kh, kw]");
}

TEST(Ir, AbsurdSizesAreRejected) {
    EXPECT_THROW(make_matmul(1 << 20, 1 << 20, 4), Error);
    EXPECT_THROW(make_matmul(0, 4, 4), Error);
}
