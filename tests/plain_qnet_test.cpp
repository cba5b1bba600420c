// The plain C++ forward pass `tune` uses (policy/plain_qnet.h) against LibTorch's network
// (rl/qnet.h), for both encoders: the same Q-values on the states of random rollouts over
// LoopTune's matmuls and convs and generated matmuls, and the same greedy rollouts (tune
// --greedy's action sequences) on 20 LoopTune benchmarks: the shipped MLP policy, and a small
// randomly initialised GNN policy written by the training side and converted.
#include "policy/plain_qnet.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "env/rl_state.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "policy/policy_extend.h"
#include "rl/policy_convert.h"
#include "rl/qnet.h"
#include "test_util.h"
#include "tune/policy.h"

using namespace looptune;
using looptool::tests::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = LOOPTUNE_CORPUS_DIR;

// Every `stride`-th benchmark of a corpus folder, `n` of them, in name order.
std::vector<std::string> corpus(const std::string &folder, size_t n, size_t stride) {
    std::vector<std::string> all;
    for (const auto &e : fs::directory_iterator(kCorpus / folder)) all.push_back(e.path());
    std::sort(all.begin(), all.end());
    std::vector<std::string> out;
    for (size_t i = 0; i < all.size() && out.size() < n; i += stride) out.push_back(all[i]);
    return out;
}

// Both networks of one policy file: LibTorch's and the plain one.
struct BothNets {
    Policy policy;
    QNet torch_net;
    bool graph;
    explicit BothNets(const std::string &path)
        : policy(Policy::load(path)),
          torch_net(qnet_from_policy_file(load_current_policy(path))),
          graph(policy.info().encoder == "gnn") {}
};

EnvConfig unmeasured(const Policy &p) {
    EnvConfig c;
    c.measure_enabled = false;  // the observation holds no GFLOPS: no kernel needs running
    return p.env_config(c);
}

// Random rollouts from each benchmark; at every state the legal actions' Q-values of both
// networks agree within 1e-4 of the row's scale. Returns the number of states compared.
int compare_on_rollouts(BothNets &nets, const std::vector<std::string> &benchmarks, uint64_t seed) {
    Environment env(unmeasured(nets.policy));
    std::mt19937_64 rng(seed);
    int states = 0;
    for (const std::string &bench : benchmarks) {
        env.reset(bench);
        while (true) {
            const RlState s = encode_state(env, nets.graph);
            if (!any_legal(s)) break;
            const std::vector<float> plain = nets.policy.q_values(env);
            torch::NoGradGuard no_grad;
            const torch::Tensor ref =
                nets.torch_net->forward(std::vector<const RlState *>{&s}).contiguous();
            const float *q = ref.data_ptr<float>();
            float scale = 1;
            for (size_t a = 0; a < plain.size(); ++a) scale = std::max(scale, std::abs(q[a]));
            std::vector<int> legal;
            for (size_t a = 0; a < plain.size(); ++a)
                if (s.mask[a]) {
                    legal.push_back(int(a));
                    EXPECT_NEAR(plain[a], q[a], 1e-4f * scale)
                        << bench << " step " << env.steps_taken() << " action " << a;
                } else {
                    EXPECT_EQ(plain[a], -std::numeric_limits<float>::infinity());
                }
            ++states;
            env.step_index(legal[rng() % legal.size()]);
        }
    }
    return states;
}

// The greedy rollout of each benchmark, acting with both networks at every state: the same
// action each time (LibTorch's through greedy_action, the training side's acting).
void expect_same_greedy_rollouts(BothNets &nets, const std::vector<std::string> &benchmarks) {
    Environment env(unmeasured(nets.policy));
    for (const std::string &bench : benchmarks) {
        env.reset(bench);
        std::vector<int> actions;
        while (env.steps_taken() < env.config().max_steps) {
            const int plain = nets.policy.act(env);
            const int torch_action = greedy_action(nets.torch_net, encode_state(env, nets.graph));
            ASSERT_EQ(plain, torch_action) << bench << " after " << actions.size() << " actions";
            if (plain < 0) break;
            actions.push_back(plain);
            env.step_index(plain);
        }
        EXPECT_FALSE(actions.empty()) << bench;
    }
}

std::vector<std::string> mixed_benchmarks(const TempDir &dir) {
    std::vector<std::string> b = corpus("mm64_256_16_range", 8, 271);
    for (const std::string &c : corpus("conv", 4, 3))
        if (c.find("_56_56_") != std::string::npos || c.find("_112_112_") != std::string::npos)
            b.push_back(c);
    for (const std::string &g :
         looptool::write_matmul_dataset({{5, 7, 3}, {64, 48, 100}, {1, 256, 33}}, dir / "gen"))
        b.push_back(g);
    return b;
}

}  // namespace

TEST(PlainQNet, TheShippedPolicyGivesLibTorchsQValues) {
    TempDir dir("plain_mlp");
    BothNets nets(shipped_policy_path());
    ASSERT_EQ(nets.policy.info().encoder, "mlp");
    const int states = compare_on_rollouts(nets, mixed_benchmarks(dir), 1);
    EXPECT_GT(states, 100);
}

TEST(PlainQNet, TheShippedPolicysGreedyRolloutsAreLibTorchs) {
    BothNets nets(shipped_policy_path());
    expect_same_greedy_rollouts(nets, corpus("mm64_256_16_range", 20, 109));
}

// A GNN policy as `train` would leave it in LibTorch's format (small, randomly initialised),
// converted into a flat file: the same Q-values and greedy rollouts.
TEST(PlainQNet, AConvertedGnnPolicyGivesLibTorchsQValuesAndRollouts) {
    TempDir dir("plain_gnn");
    torch::manual_seed(3);
    QNetConfig config;
    config.encoder = "gnn";
    config.hidden = 48;
    config.gnn_hidden = 16;
    config.gnn_rounds = 2;
    config.shape = {10, int(looptool::ActionSpace::preset("full").size())};
    QNet net(config);
    const nlohmann::json meta = {{"action_space", "full"},
                                 {"max_steps", 8},
                                 {"network", nlohmann::json::parse(qnet_config_json(config))},
                                 {"provenance", {{"test", "random gnn"}}}};
    save_policy_file(dir / "gnn.pt", net, meta.dump());
    convert_policy_file(dir / "gnn.pt", dir / "gnn.policy");
    BothNets nets(dir / "gnn.policy");
    ASSERT_EQ(nets.policy.info().encoder, "gnn");
    const int states = compare_on_rollouts(nets, mixed_benchmarks(dir), 2);
    EXPECT_GT(states, 50);
    expect_same_greedy_rollouts(nets, corpus("mm64_256_16_range", 20, 109));
}

// The shipped policy widened to the `threads` space (policy/policy_extend.h), as `policy
// extend` writes it, and the shipped `threads` policy fine-tuned from it: LibTorch's Q-values
// and greedy rollouts.
TEST(PlainQNet, TheWidenedAndTheShippedThreadsPoliciesAreLibTorchs) {
    TempDir dir("plain_threads");
    extend_policy_file(shipped_policy_path(), "threads", dir / "wide.policy");
    for (const std::string path : {dir / "wide.policy", shipped_policy_path(2)}) {
        SCOPED_TRACE(path);
        BothNets nets(path);
        ASSERT_EQ(nets.policy.info().action_space, "threads");
        EXPECT_GT(compare_on_rollouts(nets, mixed_benchmarks(dir), 4), 100);
        expect_same_greedy_rollouts(nets, corpus("mm64_256_16_range", 20, 109));
    }
}

TEST(PlainQNet, AStateOfTheWrongWidthOrWithoutItsGraphIsAnError) {
    TempDir dir("plain_width");
    const PolicyFile file = read_policy_file(shipped_policy_path());
    const NetworkConfig config = network_config_of(file);
    const PlainQNet net(config, file);
    EXPECT_THROW(net.forward(std::vector<float>(3, 0.f), nullptr), looptool::Error);
    NetworkConfig gnn = config;
    gnn.encoder = "gnn";
    EXPECT_THROW(PlainQNet(gnn, file), looptool::Error);  // an mlp's tensors
}
