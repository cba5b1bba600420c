// lib/dispatch_source.h: the generated lt_sgemm and lt_sconv2d_ex find every kernel of their
// tables by its sizes (sorted tables, binary search), whatever order the kernels came in, and
// send other shapes to the fallbacks. The kernels here are stand-ins that write their number
// into the output, compiled with the dispatch by the system's C compiler.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "lib/dispatch_source.h"
#include "test_util.h"

namespace looptune {
namespace {

using looptool::tests::TempDir;
namespace tests = looptool::tests;

constexpr const char *kParams = "const float *a, const float *b, float *c";

DispatchKernel kernel(int i, const std::string &kind, std::vector<int64_t> shape) {
    return {fmt::format("lt_k{}", i), kind, std::move(shape), kParams, "a stand-in"};
}

/// What dir's dispatch.c, kernels.c and main.c print, compiled by the system's C compiler.
std::string run(const TempDir &dir) {
    const std::string cmd = fmt::format(
        "cd '{}' && cc -std=c11 -O1 dispatch.c kernels.c main.c -lm -o prog && ./prog > out.txt",
        dir.path.string());
    if (std::system(cmd.c_str()) != 0) return "failed: " + cmd;
    return tests::slurp(dir.path / "out.txt");
}

TEST(DispatchSource, FindsEveryKernelByItsSizesInAnyOrder) {
    // Unsorted, with neighbours that differ in one size only; a conv of 7 sizes (stride 1, no
    // padding) beside ones with a stride and padding.
    const std::vector<DispatchKernel> kernels = {
        kernel(1, "matmul", {64, 64, 64}),
        kernel(2, "matmul", {8, 4096, 4096}),
        kernel(3, "matmul", {64, 64, 63}),
        kernel(4, "matmul", {1, 1, 1}),
        kernel(5, "matmul", {64, 1, 1216}),
        kernel(6, "matmul", {63, 64, 64}),
        kernel(7, "conv2d", {1, 8, 10, 36, 16, 3, 3}),
        kernel(8, "conv2d", {1, 8, 10, 36, 16, 3, 3, 2, 1}),
        kernel(9, "conv2d", {1, 8, 10, 36, 16, 3, 3, 1, 1}),
        kernel(10, "", {})};
    TempDir dir("dispatch_source");
    tests::write(dir, "looptune_kernels.h",
                 library_header(kernels, "m", "cpu", "triple", {4, 4, 4}, 4));
    tests::write(dir, "dispatch.c", dispatch_source(kernels, "lt_k10", {4, 4, 4}, "{}", 4));
    std::string stand_ins = "#include \"looptune_kernels.h\"\n";
    for (const DispatchKernel &k : kernels)  // the block kernel (lt_k10): a 4 x 4 block of 0
        stand_ins += fmt::format("void {}({}) {{ (void)a; (void)b; {} }}\n", k.function, kParams,
                                 k.kind.empty() ? "for (int i = 0; i < 16; ++i) c[i] = 0;"
                                                : fmt::format("c[0] = {};", k.function.substr(4)));
    tests::write(dir, "kernels.c", stand_ins);
    tests::write(dir, "main.c", R"(#include <stdio.h>
#include <stdlib.h>
#include "looptune_kernels.h"
/* The kernel lt_sgemm calls for these sizes: its number, or 0 (a fallback computed C). */
static int mm(int64_t m, int64_t n, int64_t k) {
    float *a = calloc(m * k + 1, 4), *b = calloc(k * n + 1, 4), *c = calloc(m * n + 1, 4);
    int got = lt_sgemm(m, n, k, a, b, c) == 0 ? (int)c[0] : -1;
    free(a), free(b), free(c);
    return got;
}
static int conv(int64_t s, int64_t p) {
    static float x[8 * 10 * 36], w[16 * 8 * 9], y[16 * 12 * 38];
    y[0] = 0;
    return lt_sconv2d_ex(1, 8, 10, 36, 16, 3, 3, s, p, x, w, y) == 0 ? (int)y[0] : -1;
}
int main(void) {
    printf("%d %d %d %d %d %d ", mm(64, 64, 64), mm(8, 4096, 4096), mm(64, 64, 63), mm(1, 1, 1),
           mm(64, 1, 1216), mm(63, 64, 64));
    printf("%d %d %d ", conv(1, 0), conv(2, 1), conv(1, 1));
    printf("%d %d %d %d\n", mm(64, 63, 64), mm(2, 2, 2), mm(65, 64, 64), conv(2, 0));
    return 0;
}
)");
    // Each kernel by its sizes; shapes in none of the tables: the fallbacks (zeros in, zeros out).
    EXPECT_EQ(run(dir), "1 2 3 4 5 6 7 8 9 0 0 0 0\n");
}

// A kernel with a variant for 64-byte aligned pointers: the variant when every pointer is 64-byte
// aligned, the kernel itself (no copy: the library's alignment is 4) when one is not.
TEST(DispatchSource, CallsTheAlignedVariantOnlyWhenEveryPointerIs64ByteAligned) {
    std::vector<DispatchKernel> kernels = {kernel(1, "matmul", {8, 8, 8}),
                                           kernel(2, "conv2d", {1, 2, 5, 5, 2, 3, 3}),
                                           kernel(3, "", {})};
    kernels[0].aligned_function = aligned_function_name("lt_k1");
    kernels[1].aligned_function = aligned_function_name("lt_k2");
    TempDir dir("dispatch_aligned");
    const std::string header = library_header(kernels, "m", "cpu", "triple", {4, 4, 4}, 4);
    EXPECT_NE(header.find("void lt_k1_a64(" + std::string(kParams) + ");"), std::string::npos);
    tests::write(dir, "looptune_kernels.h", header);
    tests::write(dir, "dispatch.c", dispatch_source(kernels, "lt_k3", {4, 4, 4}, "{}", 4));
    tests::write(dir, "kernels.c", R"(#include "looptune_kernels.h"
void lt_k1(const float *a, const float *b, float *c) { (void)a; (void)b; c[0] = 1; }
void lt_k1_a64(const float *a, const float *b, float *c) { (void)a; (void)b; c[0] = 101; }
void lt_k2(const float *a, const float *b, float *c) { (void)a; (void)b; c[0] = 2; }
void lt_k2_a64(const float *a, const float *b, float *c) { (void)a; (void)b; c[0] = 102; }
void lt_k3(const float *a, const float *b, float *c) { (void)a; (void)b; (void)c; }
)");
    tests::write(dir, "main.c", R"(#include <stdio.h>
#include <stdlib.h>
#include "looptune_kernels.h"
int main(void) {
    float *a = aligned_alloc(64, 1024), *b = aligned_alloc(64, 1024), *c = aligned_alloc(64, 1024);
    for (int i = 0; i < 256; ++i) a[i] = b[i] = c[i] = 0;
    /* offsets in floats of A, B and C past their 64-byte boundaries */
    static const int off[4][3] = {{0, 0, 0}, {1, 0, 0}, {0, 4, 0}, {0, 0, 8}};
    for (int i = 0; i < 4; ++i) {
        lt_sgemm(8, 8, 8, a + off[i][0], b + off[i][1], c + off[i][2]);
        printf("%d ", (int)c[off[i][2]]);
        lt_sconv2d(1, 2, 5, 5, 2, 3, 3, a + off[i][0], b + off[i][1], c + off[i][2]);
        printf("%d ", (int)c[off[i][2]]);
    }
    printf("\n");
    return 0;
}
)");
    EXPECT_EQ(run(dir), "101 102 1 2 1 2 1 2 \n");
}

}  // namespace
}  // namespace looptune
