#include "agents/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "looptool/error.h"

namespace looptune {

PrioritizedReplay::PrioritizedReplay(int64_t capacity, double alpha, uint64_t seed)
    : capacity_(capacity), alpha_(alpha), rng_(seed) {
    if (capacity < 1) throw looptool::Error("replay capacity must be positive");
    leaves_ = 1;
    while (leaves_ < capacity) leaves_ *= 2;
    tree_.assign(2 * leaves_, 0.0);
    min_tree_.assign(2 * leaves_, std::numeric_limits<double>::infinity());
    data_.resize(capacity);
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

void PrioritizedReplay::add(Transition t, double priority) {
    std::lock_guard<std::mutex> g(mutex_);
    const int64_t i = next_;
    data_[i] = std::move(t);
    set_priority(i, priority < 0 ? max_priority_ : priority);
    max_priority_ = std::max(max_priority_, priority);
    next_ = (next_ + 1) % capacity_;
    size_ = std::min(size_ + 1, capacity_);
    ++added_;
}

ReplaySample PrioritizedReplay::sample(int batch, double beta) {
    std::lock_guard<std::mutex> g(mutex_);
    ReplaySample out;
    if (size_ == 0) return out;
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
        int64_t i = std::min(k - leaves_, size_ - 1);
        out.indices.push_back(i);
        out.items.push_back(data_[i]);
    }
    // w_i = (N * P(i))^-beta / max_j w_j, and max_j w_j belongs to the smallest priority.
    const double p_min = min_tree_[1] / total;
    const double w_max = std::pow(size_ * p_min, -beta);
    for (int64_t i : out.indices) {
        const double p = tree_[i + leaves_] / total;
        out.weights.push_back(static_cast<float>(std::pow(size_ * p, -beta) / w_max));
    }
    return out;
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

std::vector<Transition> NStepBuilder::push(const RlState &s, int a, float reward, const RlState &next,
                                           bool done) {
    std::vector<Transition> out;
    window_.push_back({s, a, reward});
    auto emit = [&](bool terminal) {
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
        out.push_back(std::move(t));
        window_.erase(window_.begin());
    };
    if (static_cast<int>(window_.size()) == n_) emit(done);
    if (done)
        while (!window_.empty()) emit(true);
    return out;
}

}  // namespace looptune
