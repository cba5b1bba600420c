// Prioritized experience replay (Schaul et al. 2016) over n-step transitions, shared by the
// DQN loop and Ape-X's actors and learner: every method takes the one mutex, so actor threads
// can add while the learner samples. States are stored encoded, once, when they enter.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

#include "env/rl_state.h"

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

/// A sampled batch as contiguous row-major arrays, ready to be wrapped as tensors without a copy
/// (Learner::update). A learner reuses one across samples, so once sized it allocates nothing.
struct ReplaySample {
    int64_t size = 0;  ///< B, the rows below
    int flat_width = 0, num_actions = 0;
    std::vector<int64_t> indices;            ///< replay slots, for update_priorities
    std::vector<float> weights;              ///< importance-sampling weights, max-normalised
    std::vector<float> states, next_states;  ///< B x flat_width each
    std::vector<uint8_t> next_masks;  ///< B x num_actions (the target's max is over legal actions)
    std::vector<int64_t> actions;
    std::vector<float> rewards, discounts;
    std::vector<DenseGraph> graphs, next_graphs;  ///< B each when the states carry their graph
    float state_feature(int64_t row, int feature) const {
        return states[row * flat_width + feature];
    }
};

/// Storage: each transition is unpacked on add() into preallocated contiguous columns (flat
/// features, next-state masks, action, reward, discount; graphs in a slot vector), so sampling
/// copies B rows with memcpy and nothing is re-encoded or allocated per sample. The widths
/// are fixed by the first transition added; a transition of another width is an error.
class PrioritizedReplay {
public:
    PrioritizedReplay(int64_t capacity, double alpha, uint64_t seed);

    /// priority < 0: the largest priority seen so far (new transitions get sampled soon).
    void add(Transition t, double priority = -1);
    /// Samples proportionally to priority^alpha; beta anneals the IS correction.
    ReplaySample sample(int batch, double beta);
    /// The same into `out`, reusing its buffers.
    void sample(int batch, double beta, ReplaySample &out);
    void update_priorities(const std::vector<int64_t> &indices,
                           const std::vector<float> &priorities);

    int64_t size() const;
    int64_t added() const;  ///< transitions ever added

private:
    void set_priority(int64_t i, double p);  // caller holds the mutex
    void store(int64_t i, Transition &t);    // caller holds the mutex
    int64_t capacity_, leaves_;
    double alpha_, max_priority_ = 1.0;
    std::vector<double> tree_;  // sum tree: node k has children 2k, 2k+1; leaves at leaves_..
    std::vector<double> min_tree_;
    int flat_width_ = -1, num_actions_ = -1;
    bool graphs_ = false;
    int64_t rows_ = 0;  // slots allocated so far (grows to capacity_ as the replay fills)
    std::vector<float> states_, next_states_;
    std::vector<uint8_t> next_masks_;
    std::vector<int64_t> actions_;
    std::vector<float> rewards_, discounts_;
    std::vector<DenseGraph> graphs_of_, next_graphs_of_;
    int64_t next_ = 0, size_ = 0, added_ = 0;
    std::mt19937_64 rng_;
    mutable std::mutex mutex_;
};

/// Turns one episode's (state, action, reward) stream into n-step transitions.
class NStepBuilder {
public:
    NStepBuilder(int n, double gamma) : n_(n), gamma_(gamma) {}
    /// Records s --a--> (reward, next). Returns the transitions that became complete.
    std::vector<Transition> push(const RlState &s, int a, float reward, const RlState &next,
                                 bool done);
    /// The stream stops at `next` without the episode ending (a demonstration cut by an
    /// illegal action): the pending steps become transitions that bootstrap from `next`.
    std::vector<Transition> cut(const RlState &next);

private:
    Transition take_front(const RlState &next, bool terminal);
    struct Step {
        RlState s;
        int a;
        float r;
    };
    int n_;
    double gamma_;
    std::vector<Step> window_;
};

}  // namespace looptune
