// The traffic model (looptool/measure/traffic.h): the bytes a schedule moves beyond the private
// cache.
#include <gtest/gtest.h>

#include "looptool/measure/traffic.h"
#include "test_util.h"

using namespace looptool;

namespace {

using tests::tiled_matmul;

double ratio(const Program &p, int64_t cache) {
    return estimate_traffic(p.computation(), p.tree, cache).ratio();
}

constexpr int64_t kMiB = int64_t(1) << 20;

}  // namespace

// Everything fits: each line moves once. A 16x64 (64 lines), B 64x32 (128), T and C 16x32
// (32 each): 256 lines.
TEST(Traffic, WhatFitsMovesEachLineOnce) {
    const Program p = tests::matmul_program(16, 32, 64);
    const TrafficEstimate e = estimate_traffic(p.computation(), p.tree, kMiB);
    EXPECT_DOUBLE_EQ(e.compulsory_bytes, 256 * 64);
    EXPECT_DOUBLE_EQ(e.bytes, e.compulsory_bytes);
    EXPECT_DOUBLE_EQ(e.ratio(), 1.0);
}

// mm128_1500_1280 on a 1 MiB L2: the mn order sweeps all of B (7.7 MB) for every 8 rows of A,
// 16 times; the nm order keeps A (655 KB) and one 32-column panel of B in L2 while m sweeps,
// so every line moves about once; the k-blocked nkm tile sits between (A's k block again for
// every panel of B). These are the three behaviours a neighbour on the shared L3 tells apart
// (docs/decisions.md).
TEST(Traffic, TheMnOrderSweepsBForEveryBlockOfRowsTheNmOrderOnce) {
    const double mn = ratio(tiled_matmul(128, 1500, 1280, {8, 32, 0, "mn"}), kMiB);
    const double nm = ratio(tiled_matmul(128, 1500, 1280, {8, 32, 0, "nm"}), kMiB);
    const double nkm = ratio(tiled_matmul(128, 1500, 1280, {4, 64, 256, "nkm"}), kMiB);
    EXPECT_GT(mn, 10.0);
    EXPECT_LT(mn, 16.0);
    EXPECT_LT(nm, 1.2);
    EXPECT_GT(nkm, 1.5);
    EXPECT_LT(nkm, mn / 3);
    // What mn reads again, it reads in runs of 32 floats from B (7.7 MB, beyond a core's 4 MiB
    // share of the L3): a neighbour streaming through the L3 slows it 5-8x.
    auto shared = [](const Program &p) {
        return estimate_traffic(p.computation(), p.tree, kMiB).shared_cache_ratio();
    };
    EXPECT_GT(shared(tiled_matmul(128, 1500, 1280, {8, 32, 0, "mn"})), 10.0);
    EXPECT_LT(shared(tiled_matmul(128, 1500, 1280, {8, 32, 0, "nm"})), 0.1);
    EXPECT_LT(shared(tiled_matmul(128, 1500, 1280, {4, 64, 0, "mn"})), 0.1);  // runs of 64 floats
    // B of 1 MB read again by a 16x16 mn tile comes back from the L3 even then.
    EXPECT_GT(ratio(tiled_matmul(512, 512, 512, {16, 16, 0, "mn"}), 256 << 10), 4.0);
    EXPECT_LT(shared(tiled_matmul(512, 512, 512, {16, 16, 0, "mn"})), 0.1);
    // With a cache holding all of B, the mn order moves it once too.
    EXPECT_LT(ratio(tiled_matmul(128, 1500, 1280, {8, 32, 0, "mn"}), 16 * kMiB), 1.2);
}

// A naive 64^3 nest with a cache of 4 KB: for each row of A (and of C), the k loop walks all
// of B: B moves 64 times.
TEST(Traffic, ANestThatDoesNotFitMovesWhatItReusesAgain) {
    const Program p = tests::matmul_program(64, 64, 64);
    const TrafficEstimate e = estimate_traffic(p.computation(), p.tree, 4096);
    const double b_bytes = 64.0 * 64 * 4;
    EXPECT_GE(e.bytes, 64 * b_bytes);
    EXPECT_LT(e.bytes, 64 * b_bytes + 4 * 4 * b_bytes);  // + A, T and C, a few times each
}

// A convolution's windows overlap (X[.., ho + kh, wo + kw]): X's lines are its rows, once,
// not the product of output rows and kernel rows.
TEST(Traffic, OverlappingWindowsCountTheirLinesOnce) {
    const Program p =
        Program::naive(std::make_shared<Computation>(make_conv2d(1, 4, 20, 32, 8, 3, 3)));
    const TrafficEstimate e = estimate_traffic(p.computation(), p.tree, 64 * kMiB);
    // X 1x4x20x32 (160 lines), W 8x4x3x3 (18 + 1), T and Y 1x8x18x30 (270 + 1 each, rows of
    // 30 unaligned): at most about 720 lines.
    EXPECT_GE(e.compulsory_bytes, (160 + 18 + 2 * 270) * 64.0);
    EXPECT_LE(e.compulsory_bytes, (160 + 19 + 2 * 271) * 64.0 + 2 * 8 * 18 * 64.0);
    EXPECT_DOUBLE_EQ(e.bytes, e.compulsory_bytes);
}

TEST(Traffic, ThePrivateCacheSizeIsReadOrAssumed) {
    const int64_t c = private_cache_bytes();
    EXPECT_GE(c, int64_t(64) << 10);
    EXPECT_LE(c, int64_t(1) << 30);
}
