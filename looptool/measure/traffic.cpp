#include "looptool/measure/traffic.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "util/machine.h"

namespace looptool {

namespace {

constexpr double kLineBytes = 64;
constexpr int64_t kLineFloats = 16;
/// Runs shorter than 4 lines read again from beyond L2 are what a neighbour on the shared L3
/// slowed up to 5-8x; runs of 4 lines or more far less (docs/decisions.md).
constexpr int64_t kShortRunFloats = 4 * kLineFloats;
/// A core's share of the L3, in L2s (an L3 of 8 L2s shared by 8 cores, as on the CPUs measured):
/// a set read again in short runs stayed fast beside a streaming neighbour up to about four L2s
/// (docs/decisions.md).
constexpr double kL3ShareOfL2 = 4;
/// Streams read side by side that a prefetcher still follows as streams.
constexpr double kStreams = 16;

/// The loop tree as a tree: nests that share loops hang under the same nodes.
struct Node {
    int nest = -1, depth = -1;  // the loop nests[nest].loops[depth]; -1: the root
    int parent = -1;
    std::vector<int> children;
    std::vector<int> stmts;  // statements at this node (the deepest loop of their nest)
};

struct Tree {
    std::vector<Node> nodes;  // nodes[0]: the root

    explicit Tree(const LoopTree &t) {
        nodes.emplace_back();
        std::vector<int> open{0};  // the root, then the loops of the current nest
        for (size_t i = 0; i < t.nests.size(); ++i) {
            const Nest &nest = t.nests[i];
            const size_t keep = i == 0 ? 0 : size_t(t.nests[i - 1].shared);
            open.resize(1 + keep);
            for (size_t d = keep; d < nest.loops.size(); ++d) {
                Node n;
                n.nest = int(i);
                n.depth = int(d);
                n.parent = open.back();
                nodes.push_back(n);
                const int id = int(nodes.size()) - 1;
                nodes[size_t(n.parent)].children.push_back(id);
                open.push_back(id);
            }
            for (int s : nest.stmts) nodes[size_t(open.back())].stmts.push_back(s);
        }
    }
};

/// Estimates one tree's traffic.
class Model {
public:
    Model(const Computation &c, const LoopTree &t, int64_t cache)
        : c_(c), t_(t), tree_(t), cache_(double(cache)), share_(kL3ShareOfL2 * double(cache)) {}

    TrafficEstimate run() {
        TrafficEstimate e;
        const Moved first = once(tensor_lines(0, true)), all = traffic(0);
        for (size_t t = 0; t < c_.tensors.size(); ++t) {
            e.compulsory_bytes += first.bytes[t];
            e.bytes += all.bytes[t];
            // Short runs beyond the first pass over the tensor.
            e.shared_cache_bytes += std::max(0.0, all.short_bytes[t] - first.bytes[t]);
        }
        return e;
    }

private:
    const Loop &loop_of(const Node &n) const {
        return t_.nests[size_t(n.nest)].loops[size_t(n.depth)];
    }

    /// What one access touches: lines, and the length of its contiguous runs in floats.
    struct Lines {
        double lines = 0;
        double run = 1;
    };

    /// Lines of `a` touched while the loops on the path from `leaf` up to `top` run (`top`'s
    /// own loop too when `with_top`), the loops above fixed.
    Lines access_lines(const Access &a, int leaf, int top, bool with_top) const {
        // Each var's span: the coverage of its outermost loop in that part of the path. And
        // the run the hardware streams: from the innermost loop out, loops that continue the
        // contiguous run lengthen it, others multiply the streams read side by side, until
        // there are more than a prefetcher follows.
        const Tensor &tensor = c_.tensors[size_t(a.tensor)];
        std::vector<int64_t> span(c_.vars.size(), 1);
        double run = 1, streams = 1;
        for (int id = leaf; id >= 0; id = tree_.nodes[size_t(id)].parent) {
            const Node &n = tree_.nodes[size_t(id)];
            if (id == top && !with_top) break;
            if (n.nest >= 0) {
                const Nest &nest = t_.nests[size_t(n.nest)];
                const int v = loop_of(n).var;
                span[size_t(v)] = coverage(nest, n.depth);
                const int64_t step = inner_coverage(nest, n.depth);
                const double trips = double(coverage(nest, n.depth)) / double(step);
                int64_t stride = 0;
                for (size_t d = 0; d < a.index.size(); ++d)
                    stride += std::abs(a.index[d].coef_of(v)) * tensor.stride(d) * step;
                if (stride > 0 && streams <= kStreams) {
                    if (double(stride) <= run)
                        run += double(stride) * (trips - 1);
                    else
                        streams *= trips;
                }
            }
            if (id == top) break;
        }
        // Element offsets as sum(stride_v * v); vars with one stride make one run of steps
        // (conv's ho + kh: the window rows overlap, so their spans add, not multiply).
        std::map<int64_t, int64_t> steps;  // stride -> steps along it
        for (size_t d = 0; d < a.index.size(); ++d)
            for (const Affine::Term &term : a.index[d].terms) {
                const int64_t s = std::abs(term.coef) * tensor.stride(d);
                if (s > 0 && span[size_t(term.var)] > 1) steps[s] += span[size_t(term.var)] - 1;
            }
        // Strides in increasing order: one that the contiguous extent reaches extends it, a
        // larger one repeats it.
        double extent = 1, runs = 1;
        bool aligned = true;  // every run starts where the first does, modulo a line
        for (const auto &[stride, n] : steps) {
            if (double(stride) <= extent) {
                extent += double(stride * n);
            } else {
                runs *= double(n + 1);
                aligned = aligned && stride % kLineFloats == 0;
            }
        }
        const double per_run = aligned ? std::ceil(extent / double(kLineFloats))
                                       : (extent - 1) / double(kLineFloats) + 1;
        const double all = std::ceil(double(tensor.num_elements()) / double(kLineFloats)) + 1;
        return {std::min(runs * per_run, all), run};
    }

    /// Leaves (nodes with statements) under `top`, `top` included.
    void leaves(int top, std::vector<int> &out) const {
        const Node &n = tree_.nodes[size_t(top)];
        if (!n.stmts.empty()) out.push_back(top);
        for (int ch : n.children) leaves(ch, out);
    }

    /// Per tensor, what `top`'s subtree touches: the most any one access of it touches.
    std::vector<Lines> tensor_lines(int top, bool with_top) const {
        std::vector<Lines> lines(c_.tensors.size());
        std::vector<int> ls;
        leaves(top, ls);
        for (int leaf : ls)
            for (int s : tree_.nodes[size_t(leaf)].stmts) {
                const Statement &st = c_.stmts[size_t(s)];
                std::vector<const Access *> acc{&st.out};
                collect_reads(st.value, acc);
                for (const Access *a : acc) {
                    const Lines l = access_lines(*a, leaf, top, with_top);
                    if (l.lines > lines[size_t(a->tensor)].lines) lines[size_t(a->tensor)] = l;
                }
            }
        return lines;
    }

    static double bytes_of(const std::vector<Lines> &lines) {
        double sum = 0;
        for (const Lines &l : lines) sum += l.lines;
        return sum * kLineBytes;
    }

    /// Per tensor, the bytes moved and those of them moved in short runs.
    struct Moved {
        std::vector<double> bytes, short_bytes;
        void add(const Moved &o, double times) {
            for (size_t t = 0; t < bytes.size(); ++t) {
                bytes[t] += times * o.bytes[t];
                short_bytes[t] += times * o.short_bytes[t];
            }
        }
    };

    /// Each of these lines, once.
    static Moved once(const std::vector<Lines> &lines) {
        Moved m{std::vector<double>(lines.size()), std::vector<double>(lines.size())};
        for (size_t t = 0; t < lines.size(); ++t) {
            m.bytes[t] = lines[t].lines * kLineBytes;
            if (lines[t].run < double(kShortRunFloats)) m.short_bytes[t] = m.bytes[t];
        }
        return m;
    }

    Moved traffic(int id) const {
        const Node &n = tree_.nodes[size_t(id)];
        // What all iterations touch, and what one does.
        const std::vector<Lines> whole = tensor_lines(id, true), body = tensor_lines(id, false);
        if (bytes_of(whole) <= cache_) return once(whole);
        // One iteration fits: consecutive iterations keep what they share.
        if (n.nest >= 0 && bytes_of(body) <= cache_) return once(whole);
        Moved per_iteration{std::vector<double>(c_.tensors.size()),
                            std::vector<double>(c_.tensors.size())};
        for (int ch : n.children) per_iteration.add(traffic(ch), 1);
        // (Statements right at this loop touch a line or two per iteration: they fit.)
        if (!n.stmts.empty()) per_iteration.add(once(body), 1);
        if (n.nest < 0) return per_iteration;
        const Nest &nest = t_.nests[size_t(n.nest)];
        const double trips =
            double(coverage(nest, n.depth)) / double(inner_coverage(nest, n.depth));
        // A tensor whose lines do not change with this loop is read again at every iteration;
        // from a set within a core's share of the L3 they come back from there even while
        // other cores stream through it, so its short runs count once.
        Moved all = per_iteration;
        for (size_t t = 0; t < all.bytes.size(); ++t) {
            all.bytes[t] *= trips;
            const bool again = body[t].lines >= whole[t].lines;
            if (!again || body[t].lines * kLineBytes > share_) all.short_bytes[t] *= trips;
        }
        return all;
    }

    const Computation &c_;
    const LoopTree &t_;
    Tree tree_;
    double cache_;
    double share_;  // a core's share of the L3
};

}  // namespace

TrafficEstimate estimate_traffic(const Computation &c, const LoopTree &t, int64_t cache_bytes) {
    return Model(c, t, cache_bytes).run();
}

int64_t private_cache_bytes() { return looptune::cache_sizes().l2; }

}  // namespace looptool
