// A policy widened to a larger action space (policy/policy_extend.h): it loads, every old
// action keeps its Q-value and each new one starts at their mean, on the states of random
// rollouts of LoopTune's matmuls and convs; the original still loads and acts as before; what
// cannot be widened is an error naming the file.
#include "policy/policy_extend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "env/rl_state.h"
#include "looptool/ir/error.h"
#include "policy/plain_qnet.h"
#include "test_util.h"
#include "tune/policy.h"

using namespace looptune;
using looptool::tests::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = LOOPTUNE_CORPUS_DIR;

PlainQNet net_of(const PolicyFile &f) { return PlainQNet(network_config_of(f), f); }

EnvConfig unmeasured(const std::string &space) {
    EnvConfig c;
    c.measure_enabled = false;
    c.threads = 1;
    c.action_space = space;
    c.max_steps = 16;
    return c;
}

}  // namespace

TEST(PolicyExtend, OldActionsKeepTheirQValuesAndNewOnesStartAtTheirMean) {
    const PolicyFile shipped = load_current_policy(shipped_policy_path());
    const PolicyFile wide = extend_policy(shipped, "threads");
    const PlainQNet old_net = net_of(shipped), new_net = net_of(wide);
    Environment old_env(unmeasured("full")), new_env(unmeasured("threads"));
    const auto &old_space = old_env.action_space(), &new_space = new_env.action_space();
    ASSERT_GT(new_space.size(), old_space.size());
    std::mt19937_64 rng(5);
    int states = 0;
    for (const std::string &bench : looptool::tests::corpus_sample(kCorpus, 8)) {
        old_env.reset(bench);
        new_env.reset(bench);
        for (int step = 0; step < 12; ++step) {
            const RlState so = encode_state(old_env, false), sn = encode_state(new_env, false);
            if (!any_legal(so)) break;
            const std::vector<float> qo = old_net.forward(so.flat, nullptr);
            const std::vector<float> qn = new_net.forward(sn.flat, nullptr);
            float scale = 1, mean = 0;
            for (float q : qo) {
                scale = std::max(scale, std::abs(q));
                mean += q / float(qo.size());
            }
            for (size_t j = 0; j < new_space.size(); ++j) {
                const int o = old_space.index_of(new_space.actions[j]);
                EXPECT_NEAR(qn[j], o >= 0 ? qo[size_t(o)] : mean, 1e-5f * scale)
                    << bench << " step " << step << " action "
                    << looptool::action_name(new_space.actions[j]);
            }
            ++states;
            std::vector<int> legal;  // an old action, taken in both
            for (size_t a = 0; a < so.mask.size(); ++a)
                if (so.mask[a]) legal.push_back(int(a));
            const looptool::Action a = old_space.actions[size_t(legal[rng() % legal.size()])];
            old_env.step_index(old_space.index_of(a));
            new_env.step_index(new_space.index_of(a));
        }
    }
    EXPECT_GT(states, 40);
}

// Written and loaded as a policy of the wider space; the original loads and acts as before.
TEST(PolicyExtend, TheWidenedFileLoadsAndTheOriginalIsUnchanged) {
    TempDir dir("policy_extend");
    const std::string out = dir / "wide.policy";
    const std::string before = looptool::tests::slurp(shipped_policy_path());
    extend_policy_file(shipped_policy_path(), "threads", out);
    EXPECT_EQ(looptool::tests::slurp(shipped_policy_path()), before);
    const Policy wide = Policy::load(out);
    EXPECT_EQ(wide.info().action_space, "threads");
    EXPECT_EQ(wide.info().max_steps, Policy::load(shipped_policy_path()).info().max_steps);
    const auto meta = nlohmann::json::parse(wide.info().meta_json);
    EXPECT_EQ(meta["provenance"]["extended_from"], "full");
    // Widening again to the same space changes nothing.
    extend_policy_file(out, "threads", dir / "again.policy");
    EXPECT_EQ(looptool::tests::slurp(dir / "again.policy"), looptool::tests::slurp(out));
}

TEST(PolicyExtend, WhatCannotBeWidenedIsAnErrorNamingTheFile) {
    TempDir dir("policy_extend_bad");
    auto expect_error = [&](const std::string &in, const std::string &space,
                            const std::string &what) {
        try {
            extend_policy_file(in, space, dir / "out.policy");
            ADD_FAILURE() << "no error for " << space;
        } catch (const looptool::Error &e) {
            EXPECT_NE(std::string(e.what()).find(in), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
        EXPECT_FALSE(fs::exists(dir / "out.policy"));
    };
    expect_error(shipped_policy_path(), "looptune", "lacks");
    expect_error(shipped_policy_path(), "nonsense", "unknown action space");
    looptool::tests::write(dir, "junk.policy", "not a policy\n");
    expect_error(dir / "junk.policy", "threads", "junk.policy");
}

// `looptool policy extend` writes the widened file; what cannot be widened is one error line and
// no file.
TEST(PolicyExtend, ThePolicyExtendCommand) {
    TempDir dir("policy_extend_cli");
    auto r = looptool::tests::run_cli(
        dir, "policy extend '" + shipped_policy_path() + "' --space threads --out wide.policy");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Policy::load(dir / "wide.policy").info().action_space, "threads");
    r = looptool::tests::run_cli(
        dir, "policy extend '" + shipped_policy_path() + "' --space looptune --out narrow.policy");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("lacks"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "narrow.policy"));
}
