#include "rl/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "looptool/ir/error.h"

namespace looptune {

PrioritizedReplay::PrioritizedReplay(int64_t capacity, double alpha, uint64_t seed)
    : capacity_(capacity), alpha_(alpha), rng_(seed) {
    if (capacity < 1) throw looptool::Error("replay capacity must be positive");
    leaves_ = 1;
    while (leaves_ < capacity) leaves_ *= 2;
    tree_.assign(2 * leaves_, 0.0);
    min_tree_.assign(2 * leaves_, std::numeric_limits<double>::infinity());
}

void PrioritizedReplay::set_priority(int64_t i, double p) {
    const double v = std::pow(std::max(p, 1e-6), alpha_);
    int64_t k = i + leaves_;
    tree_[k] = v;
    min_tree_[k] = v;
    for (k /= 2; k >= 1; k /= 2) {
        tree_[k] = tree_[2 * k] + tree_[2 * k + 1];
        min_tree_[k] = std::min(min_tree_[2 * k], min_tree_[2 * k + 1]);
    }
}

void PrioritizedReplay::store(int64_t i, Transition &t) {
    const int F = static_cast<int>(t.state.flat.size()), A = static_cast<int>(t.next.mask.size());
    const bool graphs = t.state.graph.num_vertices > 0;
    if (flat_width_ < 0) {
        flat_width_ = F;
        num_actions_ = A;
        graphs_ = graphs;
    }
    if (F != flat_width_ || static_cast<int>(t.next.flat.size()) != flat_width_ ||
        A != num_actions_ || graphs != graphs_)
        throw looptool::Error(
            fmt::format("replay: a transition of {} features and {} actions{}, the replay "
                        "holds {} and {}{}",
                        F, A, graphs ? " with graphs" : "", flat_width_, num_actions_,
                        graphs_ ? " with graphs" : ""));
    if (i >= rows_) {  // the replay fills slot by slot; vector growth is geometric
        rows_ = i + 1;
        states_.resize(rows_ * F);
        next_states_.resize(rows_ * F);
        next_masks_.resize(rows_ * A);
        actions_.resize(rows_);
        rewards_.resize(rows_);
        discounts_.resize(rows_);
        if (graphs_) {
            graphs_of_.resize(rows_);
            next_graphs_of_.resize(rows_);
        }
    }
    std::copy_n(t.state.flat.data(), F, states_.data() + i * F);
    std::copy_n(t.next.flat.data(), F, next_states_.data() + i * F);
    std::copy_n(t.next.mask.data(), A, next_masks_.data() + i * A);
    actions_[i] = t.action;
    rewards_[i] = t.reward;
    discounts_[i] = t.discount;
    if (graphs_) {
        graphs_of_[i] = std::move(t.state.graph);
        next_graphs_of_[i] = std::move(t.next.graph);
    }
}

void PrioritizedReplay::add(Transition t, double priority) {
    std::lock_guard<std::mutex> g(mutex_);
    const int64_t i = next_;
    store(i, t);
    set_priority(i, priority < 0 ? max_priority_ : priority);
    max_priority_ = std::max(max_priority_, priority);
    next_ = (next_ + 1) % capacity_;
    size_ = std::min(size_ + 1, capacity_);
    ++added_;
}

ReplaySample PrioritizedReplay::sample(int batch, double beta) {
    ReplaySample out;
    sample(batch, beta, out);
    return out;
}

void PrioritizedReplay::sample(int batch, double beta, ReplaySample &out) {
    std::lock_guard<std::mutex> g(mutex_);
    out.indices.clear();
    out.weights.clear();
    out.size = 0;
    if (size_ == 0) return;
    const double total = tree_[1];
    // Stratified: one draw per equal slice of the total mass.
    for (int b = 0; b < batch; ++b) {
        std::uniform_real_distribution<double> u(total * b / batch, total * (b + 1) / batch);
        double x = u(rng_);
        int64_t k = 1;
        while (k < leaves_) {
            if (x <= tree_[2 * k] || tree_[2 * k + 1] <= 0) {
                k = 2 * k;
            } else {
                x -= tree_[2 * k];
                k = 2 * k + 1;
            }
        }
        out.indices.push_back(std::min(k - leaves_, size_ - 1));
    }
    // w_i = (N * P(i))^-beta / max_j w_j, and max_j w_j belongs to the smallest priority.
    const double p_min = min_tree_[1] / total;
    const double w_max = std::pow(size_ * p_min, -beta);
    for (int64_t i : out.indices) {
        const double p = tree_[i + leaves_] / total;
        out.weights.push_back(static_cast<float>(std::pow(size_ * p, -beta) / w_max));
    }
    // Gather the rows (copies: actors may overwrite the slots once the lock is released).
    const int F = flat_width_, A = num_actions_;
    out.size = batch;
    out.flat_width = F;
    out.num_actions = A;
    out.states.resize(size_t(batch) * F);
    out.next_states.resize(size_t(batch) * F);
    out.next_masks.resize(size_t(batch) * A);
    out.actions.resize(batch);
    out.rewards.resize(batch);
    out.discounts.resize(batch);
    out.graphs.resize(graphs_ ? batch : 0);
    out.next_graphs.resize(graphs_ ? batch : 0);
    for (int b = 0; b < batch; ++b) {
        const int64_t i = out.indices[b];
        std::copy_n(states_.data() + i * F, F, out.states.data() + b * F);
        std::copy_n(next_states_.data() + i * F, F, out.next_states.data() + b * F);
        std::copy_n(next_masks_.data() + i * A, A, out.next_masks.data() + b * A);
        out.actions[b] = actions_[i];
        out.rewards[b] = rewards_[i];
        out.discounts[b] = discounts_[i];
        if (graphs_) {
            out.graphs[b] = graphs_of_[i];
            out.next_graphs[b] = next_graphs_of_[i];
        }
    }
}

void PrioritizedReplay::update_priorities(const std::vector<int64_t> &indices,
                                          const std::vector<float> &priorities) {
    std::lock_guard<std::mutex> g(mutex_);
    for (size_t j = 0; j < indices.size(); ++j) {
        set_priority(indices[j], priorities[j]);
        max_priority_ = std::max<double>(max_priority_, priorities[j]);
    }
}

int64_t PrioritizedReplay::size() const {
    std::lock_guard<std::mutex> g(mutex_);
    return size_;
}

int64_t PrioritizedReplay::added() const {
    std::lock_guard<std::mutex> g(mutex_);
    return added_;
}

Transition NStepBuilder::take_front(const RlState &next, bool terminal) {
    Transition t;
    double g = 1;
    for (const Step &st : window_) {
        t.reward += static_cast<float>(g * st.r);
        g *= gamma_;
    }
    t.state = window_.front().s;
    t.action = window_.front().a;
    t.discount = terminal ? 0.f : static_cast<float>(g);
    t.next = next;
    window_.erase(window_.begin());
    return t;
}

std::vector<Transition> NStepBuilder::push(const RlState &s, int a, float reward,
                                           const RlState &next, bool done) {
    std::vector<Transition> out;
    window_.push_back({s, a, reward});
    if (static_cast<int>(window_.size()) == n_) out.push_back(take_front(next, done));
    if (done)
        while (!window_.empty()) out.push_back(take_front(next, true));
    return out;
}

std::vector<Transition> NStepBuilder::cut(const RlState &next) {
    std::vector<Transition> out;
    while (!window_.empty()) out.push_back(take_front(next, false));
    return out;
}

}  // namespace looptune
