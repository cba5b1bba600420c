// A transformer layer (looptool/gen/transformer.h) tuned op by op and run end to end beside
// oneDNN's primitives run one after another: matmul (with its bias argument; attention's two with
// the token-major strides), softmax, binary add for the residuals, GELU, layer normalization.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "looptool/check/interpreter.h"
#include "looptool/gen/transformer.h"
#include "looptool/ir/loop_tree.h"

namespace looptune {

/// The layer's tensors by name (looptool::transformer_layer): its input x and weights, then
/// what each op writes.
using LayerTensors = std::map<std::string, looptool::TensorData>;

/// The element count of each layer tensor the ops read or write; throws Error when two ops
/// disagree.
std::map<std::string, int64_t> layer_tensor_sizes(const std::vector<looptool::LayerOp> &ops);

/// x and the weights, seeded: x uniform in [-1, 1), each weight scaled by 1/sqrt(its rows),
/// biases within +-0.1, layernorm scales near 1; wq and bq also by 1/sqrt(head_dim) (softmax's
/// scale, folded).
LayerTensors layer_inputs(const looptool::TransformerShape &s,
                          const std::vector<looptool::LayerOp> &ops, uint64_t seed);

/// Runs the ops' programs (one per op, over its computation) in order on `t` with the JIT,
/// or with the float interpreter (run_schedule) when `interpret`; adds each op's output.
void run_layer(const std::vector<looptool::LayerOp> &ops,
               const std::vector<looptool::Program> &programs, LayerTensors &t,
               bool interpret = false);

/// oneDNN's primitives for the layer, bound to `t` (the inputs given, the rest added; `t` must
/// outlive it and keep its buffers). Groups in the layer's order (LayerOp::group), each with
/// what oneDNN runs for it: a projection's matmul takes its bias as its bias argument, a
/// residual add and a GELU after that run as binary and eltwise primitives (on an intermediate
/// added to `t`). A group with an op no primitive is wired for has none (description says so,
/// seconds 0).
class OnednnLayer {
public:
    OnednnLayer(const looptool::TransformerShape &s, const std::vector<looptool::LayerOp> &ops,
                LayerTensors &t);
    ~OnednnLayer();
    std::vector<std::string> groups() const;
    std::string description(const std::string &group) const;
    void run_group(const std::string &group);
    void run_all();
    /// Median seconds of one call of the group (or of all groups in order, group ""), the
    /// full measurement protocol.
    double seconds(const std::string &group);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// The largest |a - b| over tensor `name` of two runs, and the largest |b|.
struct TensorDiff {
    double max_abs_diff = 0, max_abs = 0;
};
TensorDiff tensor_diff(const LayerTensors &a, const LayerTensors &b, const std::string &name);

struct LayerRunConfig {
    double budget_s = 10;  ///< tune's budget per op
    std::string policy;    ///< "" for the shipped policy
    std::string store;     ///< measurement store ("" none)
    int rounds = 3;        ///< alternating measurement rounds, medians over them
    bool tune = true;      ///< false: the naive nests (a quick dry run)
    /// Only these groups' ops are tuned and measured, beside oneDNN's same groups (the others
    /// run naive in the chained check; the layer's figures then cover these groups alone and
    /// oneDNN's whole sequence is not timed). Empty: every group.
    std::vector<std::string> groups;
};

struct OpFigure {
    std::string name, group, found_by;
    bool epilogue = false;  ///< a projection with its epilogue nest
    bool fused = false;     ///< its tuned program runs the epilogue inside the matmul's loops
    double seconds = 0;     ///< median of the rounds
    int actions = 0;
};
struct GroupFigure {
    std::string group, onednn;
    double ours_s = 0, onednn_s = 0;
};
struct LayerFigures {
    std::string shape;
    std::vector<OpFigure> ops;
    std::vector<GroupFigure> groups;
    double ours_s = 0;          ///< the sum of our ops' medians
    double onednn_s = 0;        ///< the sum of oneDNN's groups' medians
    double onednn_chain_s = 0;  ///< median of oneDNN's whole sequence as one call
    TensorDiff output;          ///< our chained output y against oneDNN's
};

/// Tunes each op with `tune`'s guided search (each result verified), then measures our kernels
/// and oneDNN's groups in alternating rounds, and runs both chains on the same inputs.
LayerFigures run_transformer_layer(const looptool::TransformerShape &s, const LayerRunConfig &c);

}  // namespace looptune
