// One transformer encoder layer (BERT-base, ViT-B/16) as a chain of programs: the projections
// with their epilogues (bias, GELU, residual add), attention's two batched matmuls, softmax and
// the layer normalizations. Every op reads layer tensors by name and writes one, so running the
// programs in order runs the layer. A projection and its epilogue are one program, the matmul's
// nest and the epilogue's (make_matmul_epilogue), so that `fuse` can run the epilogue on the
// matmul's register tiles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptool/ir/ir.h"

namespace looptool {

/// A layer's sizes: one sequence of `tokens`, model width `hidden`, `heads` heads of hidden /
/// heads features, the feed-forward's inner width `ffn`.
struct TransformerShape {
    std::string name;
    int64_t tokens = 0, hidden = 0, heads = 0, ffn = 0;
    int64_t head_dim() const { return hidden / heads; }
};

/// BERT-base at 128 and 384 tokens, ViT-B/16 at 197 (196 patches and the class token): hidden
/// 768, 12 heads, FFN 3072.
std::vector<TransformerShape> transformer_shapes();
/// The shape called `name` (one of transformer_shapes(), "bert-base-N": BERT-base at N tokens,
/// or "tiny": 8 tokens, width 16, 2 heads, FFN 32, for checks); throws Error listing the names
/// otherwise.
TransformerShape transformer_shape(const std::string &name);

/// One op of the layer: `comp` reads the layer tensors `reads` (one per input tensor of comp,
/// in comp's order) and writes the layer tensor `writes`. `group` is the op of the layer it
/// belongs to ("qkv", "scores", "softmax", "context", "out", "ln1", "ffn_up", "ffn_down",
/// "ln2"); `epilogue` marks a projection with its epilogue nest (make_matmul_epilogue).
struct LayerOp {
    std::string group;
    Computation comp;
    std::vector<std::string> reads;
    std::string writes;
    bool epilogue = false;
};

/// The layer's ops in order: Q, K and V projections with their bias, scores (Q.K^T per head,
/// token-major heads), softmax over each score row, context (P.V), output projection with bias
/// and residual (the layer input x), layernorm, FFN up with bias and GELU, FFN down with bias
/// and residual (ln1's output), layernorm. The layer's input is "x", its output "y"; the weights
/// are wq, bq, wk, bk, wv, bv, wo, bo, g1, b1, w1, c1, w2, c2, g2, b2. Softmax's 1/sqrt(head_dim)
/// scale is folded into wq and bq, as inference engines do.
std::vector<LayerOp> transformer_layer(const TransformerShape &s);

/// Y[i, j] = X[i, j] + Bv[j] (+ R[i, j] with `residual`): a linear layer's bias (and the
/// residual connection) over its rows x cols output.
Computation make_bias_add(int64_t rows, int64_t cols, bool residual, std::string name = "");

/// Writes each op's naive program into `dir` (created if missing) as NN_<op name>, in order;
/// returns the paths.
std::vector<std::string> write_transformer_dataset(const TransformerShape &s,
                                                   const std::string &dir);

}  // namespace looptool
