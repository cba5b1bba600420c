// Prioritized experience replay (Schaul et al. 2016) over n-step transitions, shared by the
// DQN loop and Ape-X's actors and learner: every method takes the one mutex, so actor threads
// can add while the learner samples.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include "agents/rl_state.h"

namespace looptune {

/// s --a--> ... n steps ... --> next; reward is the discounted n-step sum and discount is
/// gamma^n, or 0 when the episode ended within the n steps.
struct Transition {
    RlState state;
    int action = 0;
    float reward = 0;
    float discount = 0;
    RlState next;
};

struct ReplaySample {
    std::vector<Transition> items;          // copies: actors may overwrite the slots meanwhile
    std::vector<int64_t> indices;
    std::vector<float> weights;             // importance-sampling weights, max-normalised
};

class PrioritizedReplay {
public:
    PrioritizedReplay(int64_t capacity, double alpha, uint64_t seed);

    /// priority < 0: the largest priority seen so far (new transitions get sampled soon).
    void add(Transition t, double priority = -1);
    /// Samples proportionally to priority^alpha; beta anneals the IS correction.
    ReplaySample sample(int batch, double beta);
    void update_priorities(const std::vector<int64_t> &indices, const std::vector<float> &priorities);

    int64_t size() const;
    int64_t added() const;  ///< transitions ever added

private:
    void set_priority(int64_t i, double p);  // caller holds the mutex
    int64_t capacity_, leaves_;
    double alpha_, max_priority_ = 1.0;
    std::vector<double> tree_;  // sum tree: node k has children 2k, 2k+1; leaves at leaves_..
    std::vector<double> min_tree_;
    std::vector<Transition> data_;
    int64_t next_ = 0, size_ = 0, added_ = 0;
    std::mt19937_64 rng_;
    mutable std::mutex mutex_;
};

/// Turns one episode's (state, action, reward) stream into n-step transitions.
class NStepBuilder {
public:
    NStepBuilder(int n, double gamma) : n_(n), gamma_(gamma) {}
    /// Records s --a--> (reward, next). Returns the transitions that became complete.
    std::vector<Transition> push(const RlState &s, int a, float reward, const RlState &next, bool done);

private:
    struct Step { RlState s; int a; float r; };
    int n_;
    double gamma_;
    std::vector<Step> window_;
};

}  // namespace looptune
