// Tuning with a trained policy: a greedy rollout of the Q-network under the action mask for
// the policy's step limit, measuring every schedule it visits, so both the final schedule and
// the best one seen are known (LoopTune never measured its last state).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "env/environment.h"

namespace looptune {

struct PolicyInfo {
    std::string path;
    std::string encoder;       ///< mlp | gnn
    std::string action_space;  ///< preset the network was trained with
    int max_steps = 16;        ///< rollout length
    int max_loops = 10;
    std::string meta_json;  ///< everything stored with the weights (provenance included)
};

class Policy {
public:
    /// Throws looptool::Error naming the file when it is missing or not a policy file.
    static Policy load(const std::string &path);
    Policy(Policy &&) noexcept;
    Policy &operator=(Policy &&) noexcept;
    ~Policy();

    /// Writes the policy (description, weights, checksum) to `path` as a flat policy file
    /// (policy/policy_file.h), under a temporary name renamed at the end.
    void save(const std::string &path) const;

    const PolicyInfo &info() const { return info_; }
    /// The environment configuration the policy expects (its action space, step limit and
    /// loops_tensor size) on top of `base` (store, verification, measurement protocol).
    EnvConfig env_config(EnvConfig base = {}) const;
    /// The greedy action in env's current state, as an index into env's action space; -1 when
    /// no action is legal or the step limit is reached.
    int act(const Environment &env) const;
    /// Q(s, a) for every action of env's action space in env's current state; illegal actions
    /// (and every action once the step limit is reached) are -infinity.
    std::vector<float> q_values(const Environment &env) const;

private:
    Policy();
    struct Impl;
    std::unique_ptr<Impl> impl_;
    PolicyInfo info_;
};

struct PolicyTuneResult {
    looptool::Program best, final;
    double base_gflops = 0, best_gflops = 0, final_gflops = 0;
    std::vector<looptool::Action> actions;       ///< every action of the rollout
    std::vector<looptool::Action> best_actions;  ///< prefix of `actions` that reaches `best`
    std::vector<double> step_gflops;             ///< after each action
    double seconds = 0;                          ///< rollout and measurements
};

/// What a caller of tune_with_policy() does around the rollout's measurements: before each
/// (the start's and every step's), and after each with its step (0: the start) and GFLOPS.
struct RolloutHooks {
    std::function<void()> before_measurement;
    std::function<void(int step, double gflops)> after_measurement;
};

/// Rolls the policy out from `start` in `env` (configured with policy.env_config()).
PolicyTuneResult tune_with_policy(const Policy &policy, Environment &env,
                                  const looptool::Program &start, const RolloutHooks &hooks = {});

/// The policy shipped in the repository for `threads`: policies/default.policy (action space
/// `full`) for 1, policies/threads.policy (`threads`: it also chooses which loop runs in
/// parallel) above 1.
std::string shipped_policy_path(int threads = 1);
/// Where `train --adapt` installs the policy it fine-tuned on this machine:
/// $XDG_CACHE_HOME/looptune/policies/ (else ~/.cache/...) named after machine_fingerprint(),
/// with -threads for the policy of runs on more than one thread; "" when there is no cache
/// directory. A new CPU, peak or kernel code is a new name.
std::string adapted_policy_path(int threads = 1);
/// $LOOPTUNE_POLICY if set, else this machine's adapted policy for `threads` if there is one,
/// else the shipped one for `threads` (the 1-thread ones when no other exists).
std::string default_policy_path(int threads = 1);

}  // namespace looptune
