// oneDNN's primitives bound to our buffers (baselines/onednn_primitive.h): the matmul primitive
// with attention's strides reads its operands in place and computes what the reference does.
#include <gtest/gtest.h>

#include "baselines/onednn_primitive.h"
#include "baselines/reference_kernels.h"
#include "looptool/gen/attention.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"
#include "looptool/measure/measure.h"

using namespace looptool;

// oneDNN's matmul primitive with attention's strides, checked against the reference by the
// measurer (it throws on a mismatch), both layouts; strides as the token-major layout has them.
TEST(OnednnPrimitive, MatmulReadsAttentionInPlace) {
    looptune::bench::set_library_threads(1);
    const auto m = looptune::bench::strided_matmul(make_scores(1, 12, 128, 64));
    ASSERT_TRUE(m);
    EXPECT_EQ(m->src_dims, (std::vector<int64_t>{1, 12, 128, 64}));
    EXPECT_EQ(m->src_strides, (std::vector<int64_t>{128 * 768, 64, 768, 1}));
    EXPECT_EQ(m->wei_strides, (std::vector<int64_t>{128 * 768, 64, 1, 768}));
    EXPECT_EQ(m->dst_strides, (std::vector<int64_t>{12 * 128 * 128, 128 * 128, 128, 1}));
    for (HeadLayout l : {HeadLayout::TokenMajor, HeadLayout::HeadsMajor})
        for (const Computation &c : {make_scores(2, 3, 10, 8, l), make_context(2, 3, 10, 8, l)})
            EXPECT_NO_THROW(looptune::bench::onednn_matmul_measurer("t", c)) << c.name;
    EXPECT_NO_THROW(looptune::bench::onednn_matmul_measurer("t", make_matmul(9, 7, 5)));
    EXPECT_FALSE(looptune::bench::strided_matmul(make_softmax(4, 4)));
    EXPECT_THROW(looptune::bench::onednn_matmul_measurer("t", make_softmax(4, 4)), Error);
}

// OpenMP's workers keep the mask of the thread that made them: made while the caller is pinned
// they would share its core. After onednn_set_threads each worker is on a core of its own.
TEST(OnednnPrimitive, WorkersRunOnCoresOtherThanThePinnedCallers) {
    cpu_set_t saved;
    ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
    if (CPU_COUNT(&saved) < 2) GTEST_SKIP() << "needs 2 cores";
    looptune::bench::set_library_threads(2);
    const int core = pin_to_core();
    ASSERT_GE(core, 0);
    looptune::bench::onednn_set_threads();
    const std::vector<int> cores = looptune::bench::onednn_thread_cores();
    sched_setaffinity(0, sizeof(saved), &saved);
    looptune::bench::set_library_threads(1);
    ASSERT_EQ(cores.size(), 2u);
    EXPECT_EQ(cores[0], core);
    EXPECT_GE(cores[1], 0);
    EXPECT_NE(cores[1], core);
}
