// The Q-network's batches: the MLP's first layer on a batch's non-zero columns only gives the
// same Q-values and the same gradients as on all columns.
#include "rl/qnet.h"

#include <gtest/gtest.h>

using namespace looptune;

TEST(QNet, FirstLayerOnNonZeroColumnsMatchesTheFullProduct) {
    torch::manual_seed(5);
    QNetConfig config;
    config.hidden = 64;
    config.shape.num_actions = 7;
    QNet net(config);
    const int64_t B = 32, F = config.shape.flat_size();
    // Sparse rows, as encoded states are: a third of the columns used, the rest zero.
    std::vector<float> rows(B * F, 0.f);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t f = 0; f < F; f += 3) rows[b * F + f] = float((b * 7 + f) % 11) / 5 - 1;
    StateBatch compact = make_state_batch(rows.data(), B, F, nullptr, torch::kCPU);
    ASSERT_TRUE(compact.nonzero_columns.defined());
    EXPECT_EQ(compact.nonzero_columns.size(0), (F + 2) / 3);
    StateBatch full = compact;
    full.nonzero_columns = torch::Tensor();

    auto q_and_grads = [&](const StateBatch &batch) {
        for (auto &p : net->parameters()) p.mutable_grad() = torch::Tensor();
        torch::Tensor q = net->forward(batch);
        (q * q).sum().backward();
        std::vector<torch::Tensor> out{q.detach()};
        for (auto &p : net->parameters()) out.push_back(p.grad().clone());
        return out;
    };
    const auto a = q_and_grads(compact), b = q_and_grads(full);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-4, 1e-5)) << "tensor " << i;
    // The unused columns' weights get exactly zero gradient, as with the full product.
    const torch::Tensor first_grad = a[1];  // after q: mlp.0.weight's gradient
    EXPECT_EQ(first_grad.size(1), F);
    EXPECT_EQ(first_grad.index({torch::indexing::Slice(), 1}).abs().max().item<float>(), 0.f);
}

TEST(QNet, SmallOrDenseBatchesUseAllColumns) {
    QNetConfig config;
    config.shape.num_actions = 7;
    const int64_t F = config.shape.flat_size();
    std::vector<float> rows(64 * F, 1.f);
    EXPECT_FALSE(make_state_batch(rows.data(), 64, F, nullptr, torch::kCPU)
                     .nonzero_columns.defined());  // dense
    std::fill(rows.begin(), rows.end(), 0.f);
    EXPECT_FALSE(make_state_batch(rows.data(), 1, F, nullptr, torch::kCPU)
                     .nonzero_columns.defined());  // one state: acting
}
