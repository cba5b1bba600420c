// The fused clip + Adam step against LibTorch's own clip_grad_norm_ and Adam::step (what the
// learner ran before): same parameters, moments and step counts after many steps, with the
// clip active and inactive.
#include "rl/fused_adam.h"

#include <gtest/gtest.h>

using namespace looptune;

namespace {

torch::nn::Sequential small_net() {
    return torch::nn::Sequential(torch::nn::Linear(37, 64), torch::nn::ReLU(),
                                 torch::nn::Linear(64, 5));
}

void copy_into(torch::nn::Sequential &to, const torch::nn::Sequential &from) {
    torch::NoGradGuard no_grad;
    auto src = from->parameters();
    auto dst = to->parameters();
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

torch::Tensor loss_of(torch::nn::Sequential &net, const torch::Tensor &x, const torch::Tensor &y) {
    return torch::smooth_l1_loss(net->forward(x), y);
}

/// Runs `steps` steps on both paths from the same weights and batches; returns the largest
/// relative difference of any parameter or moment.
void expect_same_as_libtorch(double max_norm, double lr, int steps) {
    torch::manual_seed(3);
    auto ref = small_net(), fused = small_net();
    copy_into(fused, ref);
    torch::optim::Adam ref_opt(ref->parameters(), torch::optim::AdamOptions(lr));
    torch::optim::Adam fused_opt(fused->parameters(), torch::optim::AdamOptions(lr));
    bool clipped = false;
    for (int s = 0; s < steps; ++s) {
        const torch::Tensor x = torch::randn({16, 37}), y = torch::randn({16, 5}) * 4;
        ref_opt.zero_grad();
        loss_of(ref, x, y).backward();
        const double ref_norm = torch::nn::utils::clip_grad_norm_(ref->parameters(), max_norm);
        ref_opt.step();

        zero_grads(fused_opt);
        loss_of(fused, x, y).backward();
        const double norm = clip_and_adam_step(fused_opt, max_norm);
        ASSERT_NEAR(norm, ref_norm, 1e-4 * ref_norm) << "step " << s;
        clipped = clipped || norm > max_norm;
    }
    EXPECT_EQ(clipped, max_norm < 1) << "the test should exercise the clip only when asked";
    auto rp = ref->parameters(), fp = fused->parameters();
    for (size_t i = 0; i < rp.size(); ++i) {
        const double scale = rp[i].abs().max().item<double>();
        EXPECT_LT((rp[i] - fp[i]).abs().max().item<double>(), 1e-4 * scale) << "parameter " << i;
        // The moments sit where torch::optim::Adam keeps them (checkpoints save them).
        auto key = [](const torch::Tensor &p) {
            return c10::guts::to_string(p.unsafeGetTensorImpl());
        };
        auto &r = static_cast<torch::optim::AdamParamState &>(*ref_opt.state().at(key(rp[i])));
        auto &f = static_cast<torch::optim::AdamParamState &>(*fused_opt.state().at(key(fp[i])));
        EXPECT_EQ(f.step(), r.step());
        EXPECT_TRUE(torch::allclose(f.exp_avg(), r.exp_avg(), 1e-4, 1e-7)) << "parameter " << i;
        EXPECT_TRUE(torch::allclose(f.exp_avg_sq(), r.exp_avg_sq(), 1e-4, 1e-9))
            << "parameter " << i;
    }
}

}  // namespace

TEST(FusedAdam, MatchesLibTorchsClipAndAdamWhenClipping) { expect_same_as_libtorch(0.3, 1e-3, 50); }

TEST(FusedAdam, MatchesLibTorchsClipAndAdamWithoutClipping) {
    expect_same_as_libtorch(1e6, 1e-3, 50);
}

TEST(FusedAdam, ZeroesGradientsInPlace) {
    auto net = small_net();
    torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
    loss_of(net, torch::randn({4, 37}), torch::randn({4, 5})).backward();
    std::vector<const void *> where;
    for (auto &p : net->parameters()) where.push_back(p.grad().data_ptr());
    zero_grads(opt);
    auto ps = net->parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
        EXPECT_EQ(ps[i].grad().data_ptr(), where[i]);
        EXPECT_EQ(ps[i].grad().abs().max().item<float>(), 0.f);
    }
}
