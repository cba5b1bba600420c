// The dense MLP path (agents/dense_mlp.h) against LibTorch's autograd: the same Q-values and
// gradients for one network, and the same training for a learner over many updates.
#include "agents/dense_mlp.h"

#include <gtest/gtest.h>

#include <random>

#include "agents/learner.h"

using namespace looptune;

namespace {

QNetConfig small_config() {
    QNetConfig config;
    config.hidden = 64;
    config.shape.num_actions = 7;
    return config;
}

// Rows like encoded states: mostly zeros, a third of the columns used, some negative values
// (so that relus clamp); `dense_rows` of them fill every column.
std::vector<float> state_rows(int64_t B, int64_t F, uint64_t seed, int64_t dense_rows = 0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> rows(B * F, 0.f);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t f = 0; f < F; ++f)
            if (b < dense_rows || f % 3 == 0) rows[b * F + f] = u(rng);
    return rows;
}

torch::Tensor from_rows(const float *p, int64_t rows, int64_t cols) {
    return torch::from_blob(const_cast<float *>(p), {rows, cols}, torch::kFloat32).clone();
}

}  // namespace

TEST(DenseMlp, QValuesAndGradientsMatchAutograd) {
    for (const int64_t B : {1, 5, 40}) {  // acting (all columns) and batches (non-zero columns)
        SCOPED_TRACE("rows " + std::to_string(B));
        torch::manual_seed(11);
        QNet net(small_config());
        ASSERT_TRUE(DenseMlp::applies(net));
        const int64_t F = net->config().shape.flat_size(), A = net->config().shape.num_actions;
        const std::vector<float> rows = state_rows(B, F, 3);
        std::vector<float> dq(B * A);
        std::mt19937_64 rng(4);
        for (float &g : dq) g = std::uniform_real_distribution<float>(-1, 1)(rng);

        // LibTorch: Q, then the gradients of sum(Q * dq) (whose dL/dQ is dq).
        torch::Tensor q = net->forward(make_state_batch(rows.data(), B, F, nullptr, torch::kCPU));
        (q * from_rows(dq.data(), B, A)).sum().backward();
        std::vector<torch::Tensor> expected;
        for (auto &p : net->parameters()) expected.push_back(p.grad().clone());

        DenseMlp dense(net);
        const float *dense_q = dense.forward({{rows.data(), B}});
        EXPECT_TRUE(torch::allclose(from_rows(dense_q, B, A), q.detach(), 1e-4, 1e-5));
        for (auto &p : net->parameters()) p.mutable_grad().fill_(123.f);  // overwritten, not added
        dense.backward(dq.data(), B);
        const auto params = net->parameters();
        for (size_t i = 0; i < params.size(); ++i)
            EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i], 1e-4, 1e-5))
                << "parameter " << i;
    }
}

TEST(DenseMlp, BackwardCoversOnlyTheLeadingRowsOfSeveralBlocks) {
    // The learner's layout: rows with a gradient first, then rows only evaluated.
    torch::manual_seed(12);
    QNet net(small_config());
    const int64_t F = net->config().shape.flat_size(), A = net->config().shape.num_actions;
    const std::vector<float> head = state_rows(20, F, 5), tail = state_rows(20, F, 6, 20);
    std::vector<float> dq(20 * A, 0.25f);

    torch::Tensor q = net->forward(make_state_batch(head.data(), 20, F, nullptr, torch::kCPU));
    (q * from_rows(dq.data(), 20, A)).sum().backward();
    std::vector<torch::Tensor> expected;
    for (auto &p : net->parameters()) expected.push_back(p.grad().clone());

    DenseMlp dense(net);
    const float *both = dense.forward({{head.data(), 20}, {tail.data(), 20}});
    torch::Tensor q_tail = net->forward(make_state_batch(tail.data(), 20, F, nullptr, torch::kCPU));
    EXPECT_TRUE(torch::allclose(from_rows(both + 20 * A, 20, A), q_tail.detach(), 1e-4, 1e-5));
    dense.backward(dq.data(), 20);
    const auto params = net->parameters();
    for (size_t i = 0; i < params.size(); ++i)
        EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i], 1e-4, 1e-5)) << "parameter " << i;
}

TEST(DenseMlp, GnnNetworksKeepAutograd) {
    QNetConfig config = small_config();
    config.encoder = "gnn";
    QNet net(config);
    EXPECT_FALSE(DenseMlp::applies(net));
}

// Two learners from the same seed, one dense and one through autograd, fed the same samples and
// demonstrations: the same losses, priorities and weights after many updates (so the dense path
// is the same training, not an approximation of it).
TEST(DenseMlp, LearnerTrainsAsAutogradDoes) {
    TrainConfig config;
    config.batch = 32;
    config.target_update = 10;  // the target network is synced, and its Q-values used, too
    config.device = "cpu";
    QNetConfig net = small_config();
    const int64_t F = net.shape.flat_size(), A = net.shape.num_actions, B = config.batch;
    TrainConfig autograd_config = config;
    autograd_config.autograd_learner = true;
    Learner dense(config, net), autograd(autograd_config, net);
    ASSERT_TRUE(dense.dense());
    ASSERT_FALSE(autograd.dense());

    std::mt19937_64 rng(7);
    std::vector<Demo> demos(12);
    for (size_t i = 0; i < demos.size(); ++i) {
        demos[i].state.flat = state_rows(1, F, 100 + i);
        demos[i].state.mask.assign(A, 1);
        demos[i].state.mask[i % A] = 0;
        demos[i].action = static_cast<int>((i + 1) % A);
    }
    for (int step = 0; step < 30; ++step) {
        ReplaySample s;
        s.size = B;
        s.flat_width = static_cast<int>(F);
        s.num_actions = static_cast<int>(A);
        s.states = state_rows(B, F, 1000 + step);
        s.next_states = state_rows(B, F, 2000 + step, 3);
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
