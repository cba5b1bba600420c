#include "env/observations.h"
#include "env/observation_bounds.h"

#include <gtest/gtest.h>

#include <numeric>

#include "env/graph_observation.h"
#include "looptool/actions/actions.h"

using namespace looptool;
using namespace looptune;

namespace {
Program matmul(int64_t m, int64_t n, int64_t k) {
    return Program::naive(std::make_shared<Computation>(make_matmul(m, n, k)));
}
float at(const Observation &o, int row, int col) {
    return o.values[size_t(row * o.shape[1] + col)];
}
}  // namespace

TEST(Observations, StrideBuckets) {
    EXPECT_EQ(stride_bucket(0), 0);
    EXPECT_EQ(stride_bucket(1), 1);
    EXPECT_EQ(stride_bucket(-1), 1);
    EXPECT_EQ(stride_bucket(2), 2);
    EXPECT_EQ(stride_bucket(3), 2);
    EXPECT_EQ(stride_bucket(256), 9);
    EXPECT_EQ(stride_bucket(int64_t(1) << 40), kStrideBuckets - 1);
}

TEST(Observations, LoopsTensorShapeAndRows) {
    Program p = matmul(64, 128, 32);  // m, k, n compute nest; m, n write nest
    Observation o = loops_tensor(p, 10);
    ASSERT_EQ(o.shape, (std::vector<int64_t>{10, kLoopFeatures}));
    ASSERT_EQ(o.values.size(), size_t(10 * kLoopFeatures));
    EXPECT_EQ(at(o, 0, 0), 1.0f);  // cursor on L0
    EXPECT_EQ(at(o, 1, 0), 0.0f);
    EXPECT_FLOAT_EQ(at(o, 0, 1), std::log2(65.0f));  // size of m
    EXPECT_EQ(at(o, 0, 3), 1.0f);                    // compute nest
    EXPECT_EQ(at(o, 3, 3), 0.0f);                    // write nest
    for (int r = 0; r < 5; ++r) EXPECT_EQ(at(o, r, 6), 1.0f);
    for (int r = 5; r < 10; ++r)
        for (int c = 0; c < kLoopFeatures; ++c) EXPECT_EQ(at(o, r, c), 0.0f) << r << "," << c;
    // Loop n (L2): T[m,n] stride 1, A[m,k] stride 0, B[k,n] stride 1.
    const float *h = &o.values[2 * kLoopFeatures + kLoopScalarFeatures];
    EXPECT_FLOAT_EQ(h[0], 1.0f / 3);
    EXPECT_FLOAT_EQ(h[1], 2.0f / 3);
    // Loop k (L1): T stride 0, A stride 1, B stride n = 128 -> bucket 8.
    h = &o.values[1 * kLoopFeatures + kLoopScalarFeatures];
    EXPECT_FLOAT_EQ(h[0], 1.0f / 3);
    EXPECT_FLOAT_EQ(h[1], 1.0f / 3);
    EXPECT_FLOAT_EQ(h[8], 1.0f / 3);
}

TEST(Observations, LoopsTensorStaysWithinItsBounds) {
    const std::vector<float> high = loops_tensor_high();
    ASSERT_EQ(high.size(), size_t(kLoopFeatures));
    // The largest extent, and a split of it with a tail.
    for (const Program &p :
         {matmul(kMaxExtent, 3, 1), apply(matmul(kMaxExtent - 1, 3, 1), Action::Split8)}) {
        Observation o = loops_tensor(p, 10);
        for (int r = 0; r < 10; ++r)
            for (int c = 0; c < kLoopFeatures; ++c) {
                EXPECT_GE(at(o, r, c), 0.0f) << r << "," << c;
                EXPECT_LE(at(o, r, c), high[size_t(c)]) << r << "," << c;
            }
    }
    // The bound is reached.
    EXPECT_EQ(at(loops_tensor(matmul(kMaxExtent, 3, 1), 10), 0, 1), high[1]);
}

TEST(Observations, SplitLoopStridesScaleWithInnerCoverage) {
    Program p = apply(matmul(64, 128, 32), Action::Split8);  // m(8) m'(8)
    Observation o = loops_tensor(p, 10);
    // The outer m advances 8 rows: T stride 8*128 = 1024 (bucket 11), A stride 8*32 (bucket 9).
    const float *h = &o.values[kLoopScalarFeatures];
    EXPECT_FLOAT_EQ(h[11], 1.0f / 3);
    EXPECT_FLOAT_EQ(h[9], 1.0f / 3);
    EXPECT_FLOAT_EQ(h[0], 1.0f / 3);  // B does not depend on m
}

TEST(Observations, LoopsTensorWindowFollowsTheCursor) {
    Program p = matmul(64, 64, 64);
    for (int i = 0; i < 3; ++i) p = apply(p, Action::Split2);  // m(8) and three inner m(2)
    ASSERT_GT(p.tree.num_loops(), 4);
    p.cursor = p.tree.num_loops() - 1;
    Observation o = loops_tensor(p, 4);
    EXPECT_EQ(at(o, 3, 0), 1.0f);  // the cursor row is the last row of the window
}

TEST(Observations, StrideTensorIsADistribution) {
    Observation o = stride_tensor(matmul(32, 48, 16));
    ASSERT_EQ(o.shape, (std::vector<int64_t>{kStrideBuckets}));
    EXPECT_NEAR(std::accumulate(o.values.begin(), o.values.end(), 0.0), 1.0, 1e-5);
    // The innermost loop n dominates: stride 1 is the largest bucket.
    EXPECT_EQ(std::max_element(o.values.begin(), o.values.end()) - o.values.begin(), 1);
}

TEST(Observations, PrevActionsSizedFromTheSpace) {
    ActionSpace full = ActionSpace::preset("full");
    std::vector<Action> hist = {Action::Up,     Action::Down,    Action::Split4,
                                Action::Split8, Action::Split16, Action::Vectorize};
    Observation o = prev_actions_tensor(hist, full);
    ASSERT_EQ(o.shape, (std::vector<int64_t>{kPrevActions, int64_t(full.size())}));
    EXPECT_EQ(at(o, 0, full.index_of(Action::Vectorize)), 1.0f);  // most recent first
    EXPECT_EQ(at(o, 4, full.index_of(Action::Down)), 1.0f);
    EXPECT_NEAR(std::accumulate(o.values.begin(), o.values.end(), 0.0), 5.0, 1e-6);
    ActionSpace lt = ActionSpace::preset("looptune");
    Observation o7 = prev_actions_tensor({Action::SwapUp}, lt);
    EXPECT_EQ(o7.shape[1], 7);
    EXPECT_EQ(at(o7, 0, 2), 1.0f);
}

TEST(GraphObservation, LoopTreeAndDataflow) {
    Program p = apply(matmul(16, 16, 16), Action::Split4);
    Graph g = loop_tree_graph(p);
    // root + 4 compute loops + 1 stmt + 2 write loops + 1 stmt
    EXPECT_EQ(boost::num_vertices(g), 9u);
    EXPECT_EQ(boost::num_edges(g), 8u);
    std::string dot = to_dot(g);
    EXPECT_NE(dot.find("digraph"), std::string::npos);
    EXPECT_NE(dot.find("T[m, n] += A[m, k] * B[k, n]"), std::string::npos);
    std::string gml = to_graphml(g);
    EXPECT_NE(gml.find("<graphml"), std::string::npos);
    DenseGraph d = to_dense(g, {0.5f, 0.25f});
    EXPECT_EQ(d.num_vertices, 9);
    EXPECT_EQ(d.features.size(), size_t(9 * kGraphVertexFeatures));
    EXPECT_EQ(d.features[1 * kGraphVertexFeatures + 8], 1.0f);  // L0 holds the cursor

    Graph df = dataflow_graph(*p.comp);
    // tensors A, B, T, C + 2 statements; edges A->s0, B->s0, s0->T, T->s1, s1->C
    EXPECT_EQ(boost::num_vertices(df), 6u);
    EXPECT_EQ(boost::num_edges(df), 5u);
}
