#include "env/observations.h"
#include "env/observation_bounds.h"

#include <algorithm>
#include <cmath>

namespace looptune {

using namespace looptool;

const std::vector<std::string> &observation_space_names() {
    static const std::vector<std::string> names = {"runtime",
                                                   "flops",
                                                   "ir",
                                                   "loop_tree",
                                                   "loops_tensor",
                                                   "stride_tensor",
                                                   "prev_actions_tensor",
                                                   "threads",
                                                   "machine_tensor"};
    return names;
}

int stride_bucket(int64_t stride) {
    if (stride == 0) return 0;
    uint64_t s = uint64_t(stride < 0 ? -stride : stride);
    int b = 1 + (63 - __builtin_clzll(s));
    return std::min(b, kStrideBuckets - 1);
}

namespace {

/// Change of the flat element offset of `a` when var `v` grows by one.
int64_t var_stride(const Computation &c, const Access &a, int v) {
    const Tensor &t = c.tensors[size_t(a.tensor)];
    int64_t s = 0;
    for (size_t d = 0; d < a.index.size(); ++d) s += a.index[d].coef_of(v) * t.stride(d);
    return s;
}

/// Adds `weight` per access (output and reads) of the nest's statements to `hist`, bucketed by
/// the access's stride when loop `depth` advances one iteration.
void add_loop_strides(const Computation &c, const Nest &nest, int depth, double weight,
                      float *hist) {
    const Loop &l = nest.loops[size_t(depth)];
    const int64_t step = inner_coverage(nest, depth);
    auto add = [&](const Access &a) {
        hist[stride_bucket(var_stride(c, a, l.var) * step)] += float(weight);
    };
    for (int s : nest.stmts) {
        const Statement &st = c.stmts[size_t(s)];
        add(st.out);
        std::vector<const Expr *> stack{&st.value};
        while (!stack.empty()) {
            const Expr *e = stack.back();
            stack.pop_back();
            if (e->op == OpKind::Read) add(e->access);
            for (const auto &arg : e->args) stack.push_back(&arg);
        }
    }
}

void normalize(float *v, int n) {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += v[i];
    if (sum > 0)
        for (int i = 0; i < n; ++i) v[i] = float(v[i] / sum);
}

bool is_compute_nest(const Computation &c, const Nest &n) {
    for (int s : n.stmts)
        if (c.stmts[size_t(s)].reduce != ReduceKind::None) return true;
    return false;
}

}  // namespace

Observation loops_tensor(const Program &p, int max_loops) {
    const Computation &c = *p.comp;
    Observation o;
    o.space = "loops_tensor";
    o.kind = Observation::Kind::Tensor;
    o.shape = {max_loops, kLoopFeatures};
    o.values.assign(size_t(max_loops) * kLoopFeatures, 0.0f);
    const int total = p.tree.num_loops();
    const int first = std::max(0, std::min(p.cursor - max_loops + 1, total - max_loops));
    int flat = 0;
    for (const auto &nest : p.tree.nests) {
        const bool compute = is_compute_nest(c, nest);
        for (size_t d = 0; d < nest.loops.size(); ++d, ++flat) {
            const int row = flat - first;
            if (row < 0 || row >= max_loops) continue;
            const Loop &l = nest.loops[d];
            float *r = &o.values[size_t(row) * kLoopFeatures];
            r[0] = flat == p.cursor;
            r[1] = float(std::log2(double(l.size) + 1));
            r[2] = float(std::log2(double(l.tail) + 1));
            r[3] = compute;
            r[4] = l.unroll;
            r[5] = l.vectorize;
            r[6] = 1;
            add_loop_strides(c, nest, int(d), 1.0, r + kLoopScalarFeatures);
            normalize(r + kLoopScalarFeatures, kStrideBuckets);
        }
    }
    return o;
}

std::vector<float> loops_tensor_high() {
    // A loop's size and tail are at most kMaxExtent (with the features' own rounding); the other
    // columns are flags and shares of a histogram.
    std::vector<float> high(kLoopFeatures, 1.0f);
    high[1] = high[2] = float(std::log2(double(kMaxExtent) + 1));
    return high;
}

Observation stride_tensor(const Program &p) {
    const Computation &c = *p.comp;
    Observation o;
    o.space = "stride_tensor";
    o.kind = Observation::Kind::Tensor;
    o.shape = {kStrideBuckets};
    o.values.assign(kStrideBuckets, 0.0f);
    for (const auto &nest : p.tree.nests) {
        // Weight each loop by how often it advances: the product of the trip counts of the
        // loops around and including it (tails counted as one more iteration).
        double advances = 1;
        for (size_t d = 0; d < nest.loops.size(); ++d) {
            const Loop &l = nest.loops[d];
            advances *= double(l.size + (l.tail > 0));
            add_loop_strides(c, nest, int(d), advances, o.values.data());
        }
    }
    normalize(o.values.data(), kStrideBuckets);
    return o;
}

Observation prev_actions_tensor(const std::vector<Action> &history, const ActionSpace &space) {
    Observation o;
    o.space = "prev_actions_tensor";
    o.kind = Observation::Kind::Tensor;
    const int n = int(space.size());
    o.shape = {kPrevActions, n};
    o.values.assign(size_t(kPrevActions) * size_t(n), 0.0f);
    for (int i = 0; i < kPrevActions && i < int(history.size()); ++i) {
        int a = space.index_of(history[history.size() - 1 - size_t(i)]);
        if (a >= 0) o.values[size_t(i) * size_t(n) + size_t(a)] = 1.0f;
    }
    return o;
}

namespace {

// (log2(v) - lo) / span, within [0, 1]; 0 for v <= 0 (not known).
float log_scaled(double v, double lo, double span) {
    if (!(v > 0)) return 0.f;
    return float(std::clamp((std::log2(v) - lo) / span, 0.0, 1.0));
}

}  // namespace

std::vector<float> machine_vector(const MachineFigures &m, int threads) {
    const int cores = std::max(m.cores, 1);
    threads = std::max(threads, 1);
    return {
        log_scaled(double(m.l1d_bytes), 12, 10),  // 4 KiB .. 4 MiB
        log_scaled(double(m.l2_bytes), 16, 10),   // 64 KiB .. 64 MiB
        log_scaled(double(m.l3_bytes), 16, 12),   // 64 KiB .. 256 MiB a core
        float(std::clamp(m.vector_bits / 512.0, 0.0, 1.0)),
        float(std::clamp(std::log2(1 + std::max(m.peak_gflops, 0.0)) / 11, 0.0, 1.0)),
        log_scaled(double(cores), 0, 8),  // 1 .. 256 cores
        float(std::min(double(threads) / cores, 1.0)),
        log_scaled(double(threads), 0, 8),
    };
}

std::vector<float> machine_tensor_high() { return std::vector<float>(kMachineFeatures, 1.0f); }

Observation machine_tensor(const std::vector<float> &vector) {
    Observation o;
    o.space = "machine_tensor";
    o.kind = Observation::Kind::Tensor;
    o.shape = {int64_t(vector.size())};
    o.values = vector;
    return o;
}

}  // namespace looptune
