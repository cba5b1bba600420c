#include "tune/policy.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>

#include "env/rl_state.h"
#include "env/store/measurement_store.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "policy/plain_qnet.h"
#include "policy/policy_extend.h"
#include "policy/policy_file.h"
#include "util/cache_dir.h"

namespace looptune {

struct Policy::Impl {
    PolicyFile file;  // as read: what save() writes back
    std::optional<PlainQNet> net;
    bool graph = false;  // the encoder needs states with their graph
};

Policy::Policy() : impl_(std::make_unique<Impl>()) {}
Policy::Policy(Policy &&) noexcept = default;
Policy &Policy::operator=(Policy &&) noexcept = default;
Policy::~Policy() = default;

Policy Policy::load(const std::string &path) {
    Policy p;
    Impl &impl = *p.impl_;
    PolicyInfo &info = p.info_;
    impl.file = load_current_policy(path);  // a policy from before the machine vector widened
    try {
        const nlohmann::json j = nlohmann::json::parse(impl.file.meta_json);
        const NetworkConfig config = network_config_from_json(j.at("network").dump());
        impl.net.emplace(config, impl.file);
        info.path = path;
        info.meta_json = impl.file.meta_json;
        info.encoder = config.encoder;
        impl.graph = config.encoder == "gnn";
        info.action_space = j.at("action_space").get<std::string>();
        const nlohmann::json &steps = j.at("max_steps");
        if (!steps.is_number_integer() || steps.get<int64_t>() < 1 ||
            steps.get<int64_t>() > kMaxEpisodeSteps)
            throw looptool::Error(fmt::format("max_steps {} is not an integer in [1, {}]",
                                              steps.dump(), kMaxEpisodeSteps));
        info.max_steps = steps.get<int>();
        info.max_loops = config.max_loops;
        const auto space = looptool::ActionSpace::preset(info.action_space);
        if (static_cast<int>(space.size()) != config.num_actions)
            throw looptool::Error("the network's action count does not match preset " + space.name);
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(path + ": bad policy description: " + e.what());
    } catch (const looptool::Error &e) {
        throw looptool::Error(path + ": not a looptune policy file: " + e.what());
    }
    return p;
}

EnvConfig Policy::env_config(EnvConfig base) const {
    base.action_space = info_.action_space;
    base.max_steps = info_.max_steps;
    base.max_loops = info_.max_loops;
    return base;
}

void Policy::save(const std::string &path) const { write_policy_file(path, impl_->file); }

// Q(s, .) of env's state under the policy's network, masked: -infinity where illegal.
static std::vector<float> masked_q(const PlainQNet &net, bool graph, const PolicyInfo &info,
                                   const Environment &env, RlState *state) {
    if (env.action_space().name != info.action_space || env.config().max_loops != info.max_loops)
        throw looptool::Error(
            "the environment is not configured for this policy (use Policy::env_config)");
    RlState &s = *state;
    s = encode_state(env, graph);
    std::vector<float> q(s.mask.size(), -std::numeric_limits<float>::infinity());
    if (!any_legal(s)) return q;
    const std::vector<float> out = net.forward(s.flat, graph ? &s.graph : nullptr);
    for (size_t a = 0; a < q.size(); ++a)
        if (s.mask[a]) q[a] = out[a];
    return q;
}

int Policy::act(const Environment &env) const {
    RlState s;
    const std::vector<float> q = masked_q(*impl_->net, impl_->graph, info_, env, &s);
    int best = -1;  // the first of equal maxima, as the training side's greedy_action
    for (int a = 0; a < static_cast<int>(q.size()); ++a)
        if (s.mask[size_t(a)] && (best < 0 || q[size_t(a)] > q[size_t(best)])) best = a;
    return best;
}

std::vector<float> Policy::q_values(const Environment &env) const {
    RlState s;
    return masked_q(*impl_->net, impl_->graph, info_, env, &s);
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

std::string shipped_policy_path(int threads) {
    return std::string(LOOPTUNE_SOURCE_DIR) +
           (threads > 1 ? "/policies/threads.policy" : "/policies/default.policy");
}

std::string adapted_policy_path(int threads) {
    const std::string dir = looptune_cache_dir();
    if (dir.empty()) return "";
    return dir + "/policies/" +
           file_name_from(machine_fingerprint(looptool::machine_peak_gflops())) +
           (threads > 1 ? "-threads" : "") + ".policy";
}

std::string default_policy_path(int threads) {
    if (const char *p = std::getenv("LOOPTUNE_POLICY"); p && *p) return p;
    const auto exists = [](const std::string &p) {
        return !p.empty() && std::filesystem::exists(p);
    };
    if (threads > 1) {  // the policies that also choose the parallel loop
        if (exists(adapted_policy_path(threads))) return adapted_policy_path(threads);
        if (exists(shipped_policy_path(threads))) return shipped_policy_path(threads);
    }
    if (exists(adapted_policy_path())) return adapted_policy_path();
    return shipped_policy_path();
}

}  // namespace looptune
