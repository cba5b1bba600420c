// The dense Q-network (rl/dense_qnet.h) against LibTorch's autograd, for both encoders: the
// same Q-values and gradients for one network, and the same training for a learner over many
// updates.
#include "rl/dense_qnet.h"

#include <gtest/gtest.h>

#include <random>

#include "looptool/ir/error.h"
#include "rl/learner.h"

using namespace looptune;

namespace {

QNetConfig small_config(const std::string &encoder) {
    QNetConfig config;
    config.encoder = encoder;
    config.hidden = 64;
    config.gnn_hidden = 16;
    config.gnn_rounds = 2;
    config.shape.num_actions = 7;
    return config;
}

// States like encoded ones: flat rows mostly zeros (a third of the columns used, `dense_rows`
// of them full), with negative values so that relus clamp; and small random trees with one
// cursor vertex (vertex feature 8) for the GNN.
struct States {
    std::vector<float> rows;
    std::vector<DenseGraph> graphs;
    std::vector<const DenseGraph *> pointers;
    StateBatch batch;  // LibTorch's view of the same states
};

States make_states(const QNetConfig &config, int64_t B, uint64_t seed, int64_t dense_rows = 0) {
    const int64_t F = config.shape.flat_size();
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    States s;
    s.rows.assign(B * F, 0.f);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t f = 0; f < F; ++f)
            if (b < dense_rows || f % 3 == 0) s.rows[b * F + f] = u(rng);
    for (int64_t b = 0; b < B; ++b) {
        DenseGraph g;
        g.num_vertices = 1 + static_cast<int>(rng() % 7);
        for (int v = 0; v < g.num_vertices * kGraphVertexFeatures; ++v)
            g.features.push_back(u(rng));
        const int cursor = static_cast<int>(rng() % g.num_vertices);
        for (int v = 0; v < g.num_vertices; ++v)
            g.features[v * kGraphVertexFeatures + 8] = v == cursor ? 1.f : 0.f;
        for (int v = 1; v < g.num_vertices; ++v)
            g.edges.emplace_back(static_cast<int>(rng() % v), v);  // parent -> child
        s.graphs.push_back(std::move(g));
    }
    for (const DenseGraph &g : s.graphs) s.pointers.push_back(&g);
    s.batch = make_state_batch(s.rows.data(), B, F,
                               config.encoder == "gnn" ? s.pointers.data() : nullptr, torch::kCPU);
    return s;
}

RowBlock block_of(const States &s, int64_t B, bool gnn) {
    return {s.rows.data(), B, gnn ? s.pointers.data() : nullptr};
}

torch::Tensor from_rows(const float *p, int64_t rows, int64_t cols) {
    return torch::from_blob(const_cast<float *>(p), {rows, cols}, torch::kFloat32).clone();
}

class DenseQNetTest : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(DenseQNetTest, QValuesAndGradientsMatchAutograd) {
    const QNetConfig config = small_config(GetParam());
    const bool gnn = config.encoder == "gnn";
    for (const int64_t B : {1, 5, 40}) {  // acting and batches (for the MLP: non-zero columns)
        SCOPED_TRACE("rows " + std::to_string(B));
        torch::manual_seed(11);
        QNet net(config);
        ASSERT_TRUE(DenseQNet::applies(net));
        const int64_t A = config.shape.num_actions;
        const States s = make_states(config, B, 3);
        std::vector<float> dq(B * A);
        std::mt19937_64 rng(4);
        for (float &g : dq) g = std::uniform_real_distribution<float>(-1, 1)(rng);

        // LibTorch: Q, then the gradients of sum(Q * dq) (whose dL/dQ is dq).
        torch::Tensor q = net->forward(s.batch);
        (q * from_rows(dq.data(), B, A)).sum().backward();
        std::vector<torch::Tensor> expected;
        for (auto &p : net->parameters()) expected.push_back(p.grad().clone());

        DenseQNet dense(net);
        const float *dense_q = dense.forward({block_of(s, B, gnn)});
        EXPECT_TRUE(torch::allclose(from_rows(dense_q, B, A), q.detach(), 1e-4, 1e-5));
        for (auto &p : net->parameters()) p.mutable_grad().fill_(123.f);  // overwritten, not added
        dense.backward(dq.data(), B);
        const auto params = net->parameters();
        for (size_t i = 0; i < params.size(); ++i)
            EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i], 1e-4, 1e-5))
                << "parameter " << i;
    }
}

TEST_P(DenseQNetTest, BackwardCoversOnlyTheLeadingStatesOfSeveralBlocks) {
    // The learner's layout: states with a gradient first, then states only evaluated.
    const QNetConfig config = small_config(GetParam());
    const bool gnn = config.encoder == "gnn";
    const int64_t A = config.shape.num_actions;
    torch::manual_seed(12);
    QNet net(config);
    const States head = make_states(config, 20, 5), tail = make_states(config, 20, 6, 20);
    std::vector<float> dq(20 * A, 0.25f);

    torch::Tensor q = net->forward(head.batch);
    (q * from_rows(dq.data(), 20, A)).sum().backward();
    std::vector<torch::Tensor> expected;
    for (auto &p : net->parameters()) expected.push_back(p.grad().clone());

    DenseQNet dense(net);
    const float *both = dense.forward({block_of(head, 20, gnn), block_of(tail, 20, gnn)});
    torch::Tensor q_tail = net->forward(tail.batch);
    EXPECT_TRUE(torch::allclose(from_rows(both + 20 * A, 20, A), q_tail.detach(), 1e-4, 1e-5));
    dense.backward(dq.data(), 20);
    const auto params = net->parameters();
    for (size_t i = 0; i < params.size(); ++i)
        EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i], 1e-4, 1e-5))
            << "parameter " << i;
}

// Two learners from the same seed, one dense and one through autograd, fed the same samples and
// demonstrations: the same losses, priorities and weights after many updates (so the dense path
// is the same training, not an approximation of it).
TEST_P(DenseQNetTest, LearnerTrainsAsAutogradDoes) {
    TrainConfig config;
    config.batch = 32;
    config.target_update = 10;  // the target network is synced, and its Q-values used, too
    config.device = "cpu";
    const QNetConfig net = small_config(GetParam());
    const bool gnn = net.encoder == "gnn";
    const int64_t F = net.shape.flat_size(), A = net.shape.num_actions, B = config.batch;
    TrainConfig autograd_config = config;
    autograd_config.autograd_learner = true;
    Learner dense(config, net), autograd(autograd_config, net);
    ASSERT_TRUE(dense.dense());
    ASSERT_FALSE(autograd.dense());

    std::mt19937_64 rng(7);
    std::vector<Demo> demos(12);
    for (size_t i = 0; i < demos.size(); ++i) {
        States one = make_states(net, 1, 100 + i);
        demos[i].state.flat = one.rows;
        if (gnn) demos[i].state.graph = one.graphs[0];
        demos[i].state.mask.assign(A, 1);
        demos[i].state.mask[i % A] = 0;
        demos[i].action = static_cast<int>((i + 1) % A);
    }
    for (int step = 0; step < 30; ++step) {
        ReplaySample s;
        s.size = B;
        s.flat_width = static_cast<int>(F);
        s.num_actions = static_cast<int>(A);
        States states = make_states(net, B, 1000 + step),
               next = make_states(net, B, 2000 + step, 3);
        s.states = states.rows;
        s.next_states = next.rows;
        if (gnn) {
            s.graphs = states.graphs;
            s.next_graphs = next.graphs;
        }
        for (int64_t b = 0; b < B; ++b) {
            s.weights.push_back(0.5f + float(rng() % 100) / 200);
            s.actions.push_back(int64_t(rng() % A));
            s.rewards.push_back(float(rng() % 400) / 100 - 2);  // some |TD| > 1: Huber's kink
            s.discounts.push_back(rng() % 5 == 0 ? 0.f : 0.97f);
            for (int64_t a = 0; a < A; ++a) s.next_masks.push_back(rng() % 3 != 0);
        }
        std::vector<float> p_dense, p_autograd;
        const bool with_demos = step % 2 == 0;
        const float l_dense = dense.update(s, &p_dense, with_demos ? &demos : nullptr);
        const float l_autograd = autograd.update(s, &p_autograd, with_demos ? &demos : nullptr);
        ASSERT_NEAR(l_dense, l_autograd, 1e-4 * (1 + std::abs(l_autograd))) << "update " << step;
        ASSERT_EQ(p_dense.size(), size_t(B));
        for (int64_t b = 0; b < B; ++b)
            ASSERT_NEAR(p_dense[b], p_autograd[b], 1e-4 * (1 + p_autograd[b])) << "update " << step;
    }
    const auto a = dense.online->parameters(), b = autograd.online->parameters();
    for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-4, 1e-5)) << "parameter " << i;
    // Training moved the weights (the comparison above is not of two untouched networks).
    torch::manual_seed(0);
    QNet fresh(net);
    EXPECT_FALSE(torch::allclose(a[0], fresh->parameters()[0]));
}

INSTANTIATE_TEST_SUITE_P(Encoders, DenseQNetTest, ::testing::Values("mlp", "gnn"));

TEST(DenseQNet, GraphlessStatesAreRefusedByTheGnn) {
    const QNetConfig config = small_config("gnn");
    QNet net(config);
    DenseQNet dense(net);
    std::vector<float> row(config.shape.flat_size(), 0.f);
    DenseGraph empty;
    const DenseGraph *graphs[] = {&empty};
    EXPECT_THROW(dense.forward({{row.data(), 1, graphs}}), looptool::Error);
}
