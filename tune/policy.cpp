#include "tune/policy.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <limits>

#include "looptool/ir/error.h"
#include "rl/qnet.h"
#include "rl/rl_state.h"
#include "rl/torch_errors.h"
#include "rl/trainer.h"

namespace looptune {

struct Policy::Impl {
    QNet net{nullptr};
    bool graph = false;  // the encoder needs states with their graph
};

Policy::Policy() : impl_(std::make_unique<Impl>()) {}
Policy::Policy(Policy &&) noexcept = default;
Policy &Policy::operator=(Policy &&) noexcept = default;
Policy::~Policy() = default;

Policy Policy::load(const std::string &path) {
    Policy p;
    p.impl_->net = load_policy_file(path, &p.info_.meta_json);
    try {
        nlohmann::json j = nlohmann::json::parse(p.info_.meta_json);
        p.info_.path = path;
        p.info_.encoder = p.impl_->net->config().encoder;
        p.impl_->graph = p.info_.encoder == name(Encoder::Gnn);
        p.info_.action_space = j.at("action_space").get<std::string>();
        const nlohmann::json &steps = j.at("max_steps");
        if (!steps.is_number_integer() || steps.get<int64_t>() < 1 ||
            steps.get<int64_t>() > kMaxEpisodeSteps)
            throw looptool::Error(fmt::format("{}: max_steps {} is not an integer in [1, {}]", path,
                                              steps.dump(), kMaxEpisodeSteps));
        p.info_.max_steps = steps.get<int>();
        p.info_.max_loops = p.impl_->net->config().shape.max_loops;
        const auto space = looptool::ActionSpace::preset(p.info_.action_space);
        if (static_cast<int>(space.size()) != p.impl_->net->config().shape.num_actions)
            throw looptool::Error("the network's action count does not match preset " + space.name);
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(path + ": bad policy description: " + e.what());
    }
    return p;
}

EnvConfig Policy::env_config(EnvConfig base) const {
    base.action_space = info_.action_space;
    base.max_steps = info_.max_steps;
    base.max_loops = info_.max_loops;
    return base;
}

void Policy::save(const std::string &path) const {
    one_line_torch_errors([&] { save_policy_file(path, impl_->net, info_.meta_json); });
}

int Policy::act(const Environment &env) const {
    if (env.action_space().name != info_.action_space || env.config().max_loops != info_.max_loops)
        throw looptool::Error(
            "the environment is not configured for this policy (use Policy::env_config)");
    return one_line_torch_errors(
        [&] { return greedy_action(impl_->net, encode_state(env, impl_->graph)); });
}

std::vector<float> Policy::q_values(const Environment &env) const {
    if (env.action_space().name != info_.action_space || env.config().max_loops != info_.max_loops)
        throw looptool::Error(
            "the environment is not configured for this policy (use Policy::env_config)");
    const RlState s = encode_state(env, impl_->graph);
    std::vector<float> q(s.mask.size(), -std::numeric_limits<float>::infinity());
    if (!any_legal(s)) return q;
    torch::NoGradGuard no_grad;
    const torch::Tensor out = impl_->net->forward(std::vector<const RlState *>{&s}).to(torch::kCPU);
    const auto row = out.accessor<float, 2>();
    for (size_t a = 0; a < q.size(); ++a)
        if (s.mask[a]) q[a] = row[0][int64_t(a)];
    return q;
}

PolicyTuneResult tune_with_policy(const Policy &policy, Environment &env,
                                  const looptool::Program &start, const RolloutHooks &hooks) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto before = [&] {
        if (hooks.before_measurement) hooks.before_measurement();
    };
    const auto after = [&](int step) {
        if (hooks.after_measurement) hooks.after_measurement(step, env.gflops());
    };
    PolicyTuneResult r;
    before();
    env.reset(start);
    r.base_gflops = r.best_gflops = r.final_gflops = env.gflops();
    r.best = r.final = env.program();
    after(0);
    while (env.steps_taken() < env.config().max_steps) {
        const int a = policy.act(env);
        if (a < 0) break;
        before();
        env.step_index(a);
        r.actions.push_back(env.action_space().actions[size_t(a)]);
        r.step_gflops.push_back(env.gflops());
        after(int(r.actions.size()));
        if (env.gflops() > r.best_gflops) {
            r.best_gflops = env.gflops();
            r.best = env.program();
            r.best_actions = r.actions;
        }
    }
    r.final = env.program();
    r.final_gflops = env.gflops();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

std::string default_policy_path() {
    if (const char *p = std::getenv("LOOPTUNE_POLICY"); p && *p) return p;
    return std::string(LOOPTUNE_SOURCE_DIR) + "/policies/default.pt";
}

}  // namespace looptune
