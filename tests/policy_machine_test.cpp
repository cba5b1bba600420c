// A policy from before the machine vector (the shipped default.policy and threads.policy) is
// widened on load with zero weights for the new inputs (policy/policy_extend.h:
// with_machine_inputs) and acts exactly as before: the same Q-values in the plain forward and
// the same greedy action sequences in the plain forward and in LibTorch's qnet, against the
// file as it is fed the states without the vector. Training from it (train --adapt) learns
// weights for the new inputs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "env/rl_state.h"
#include "looptool/gen/generate.h"
#include "policy/plain_qnet.h"
#include "policy/policy_extend.h"
#include "rl/policy_convert.h"
#include "rl/qnet.h"
#include "rl/trainer.h"
#include "test_util.h"
#include "tune/policy.h"

using namespace looptune;
using looptool::tests::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = LOOPTUNE_CORPUS_DIR;

// The first legal maximum, as Policy::act and greedy_action take it.
int greedy(const std::vector<float> &q, const std::vector<uint8_t> &mask) {
    int best = -1;
    for (int a = 0; a < int(q.size()); ++a)
        if (mask[size_t(a)] && (best < 0 || q[size_t(a)] > q[size_t(best)])) best = a;
    return best;
}

// `s` as a network from before the machine vector reads it.
RlState without_machine(const RlState &s) {
    RlState old = s;
    old.flat.resize(old.flat.size() - kMachineFeatures);
    return old;
}

}  // namespace

TEST(PolicyMachine, AnOldPolicyGetsZeroWeightsForTheMachineInputs) {
    for (const std::string &path : {shipped_policy_path(1), shipped_policy_path(2)}) {
        const PolicyFile raw = read_policy_file(path);
        ASSERT_EQ(network_config_of(raw).machine_features, 0) << path << ": already has the inputs";
        const PolicyFile up = with_machine_inputs(raw);
        EXPECT_EQ(network_config_of(up).machine_features, kMachineFeatures);
        ASSERT_EQ(up.tensors.size(), raw.tensors.size());
        for (size_t i = 0; i < raw.tensors.size(); ++i) {
            const PolicyTensor &o = raw.tensors[i], &n = up.tensors[i];
            ASSERT_EQ(o.name, n.name);
            if (o.shape == n.shape) {
                EXPECT_EQ(o.data, n.data) << o.name;
                continue;
            }
            ASSERT_EQ(n.shape[1], o.shape[1] + kMachineFeatures) << o.name;
            for (int64_t r = 0; r < o.shape[0]; ++r)
                for (int64_t c = 0; c < n.shape[1]; ++c)
                    ASSERT_EQ(n.data[size_t(r * n.shape[1] + c)],
                              c < o.shape[1] ? o.data[size_t(r * o.shape[1] + c)] : 0.f)
                        << o.name << " [" << r << ", " << c << "]";
        }
        const PolicyFile again = with_machine_inputs(up);  // nothing more to add
        EXPECT_EQ(again.meta_json, up.meta_json);
        EXPECT_EQ(load_current_policy(path).meta_json, up.meta_json);
    }
}

// At every state of each greedy rollout: the plain forward's Q-values of the old file (fed the
// state without the vector) and of the widened one are the same floats, and the four greedy
// actions (old and widened, plain and LibTorch) agree; the rollout follows them.
TEST(PolicyMachine, OldPoliciesActExactlyAsBeforeInBothForwards) {
    for (const std::string &path : {shipped_policy_path(1), shipped_policy_path(2)}) {
        const PolicyFile raw = read_policy_file(path);
        const PlainQNet old_plain(network_config_of(raw), raw);
        QNet old_torch = qnet_from_policy_file(raw);
        const Policy policy = Policy::load(path);
        QNet new_torch = qnet_from_policy_file(load_current_policy(path));
        EnvConfig c;
        c.measure_enabled = false;
        c.threads = path == shipped_policy_path(2) ? 2 : 1;
        Environment env(policy.env_config(c));
        const bool graph = policy.info().encoder == "gnn";
        int states = 0;
        for (const std::string &bench : looptool::tests::corpus_sample(kCorpus, 6)) {
            env.reset(bench);
            std::vector<int> actions;
            while (true) {
                const RlState s = encode_state(env, graph), old = without_machine(s);
                if (!any_legal(s)) break;
                const std::vector<float> q_old = old_plain.forward(old.flat, &old.graph);
                std::vector<float> q_new = policy.q_values(env);
                for (size_t a = 0; a < q_new.size(); ++a)
                    if (s.mask[a]) EXPECT_EQ(q_new[a], q_old[a]) << bench << " action " << a;
                const int before = greedy(q_old, s.mask);
                ASSERT_EQ(policy.act(env), before) << path << " " << bench << " " << states;
                torch::NoGradGuard no_grad;
                ASSERT_EQ(greedy_action(old_torch, old), before) << path << " " << bench;
                ASSERT_EQ(greedy_action(new_torch, s), before) << path << " " << bench;
                actions.push_back(before);
                env.step_index(before);
                ++states;
            }
            EXPECT_FALSE(actions.empty()) << bench;
        }
        EXPECT_GT(states, 40) << path;
    }
}

// train --adapt from the shipped policy: the run starts from its weights and learns non-zero
// weights for the machine inputs (its states carry this machine's vector).
TEST(PolicyMachine, AdaptingAnOldPolicyLearnsTheMachineInputs) {
    TempDir dir("policy_machine_adapt");
    looptool::write_matmul_dataset({{8, 8, 8}, {12, 8, 4}, {16, 8, 8}, {16, 16, 16}},
                                   (dir.path / "ds").string());
    const PolicyFile raw = read_policy_file(shipped_policy_path());
    const NetworkConfig net = network_config_of(raw);
    TrainConfig c;
    c.dataset_dir = dir / "ds";
    c.out_dir = dir / "run";
    c.init_policy = shipped_policy_path();
    c.action_space = nlohmann::json::parse(raw.meta_json).at("action_space").get<std::string>();
    c.max_steps = nlohmann::json::parse(raw.meta_json).at("max_steps").get<int>();
    c.max_loops = net.max_loops;
    c.hidden = net.hidden;
    c.steps = 48;
    c.learning_starts = 16;
    c.batch = 8;
    c.eval_benchmarks = 0;
    train(c);
    const PolicyFile trained = read_policy_file(dir / "run/trained.policy");
    const PolicyTensor *w = trained.find("mlp.0.weight");
    ASSERT_TRUE(w);
    const int64_t cols = w->shape[1];
    ASSERT_EQ(cols, network_config_of(trained).flat_size());
    int nonzero = 0;
    for (int64_t r = 0; r < w->shape[0]; ++r)
        for (int64_t col = cols - kMachineFeatures; col < cols; ++col)
            nonzero += w->data[size_t(r * cols + col)] != 0.f;
    EXPECT_GT(nonzero, 0);
}
