// Program forms: a matmul written by hand (any variable names and declaration order, with or
// without a temporary, operands in either order) rewritten as `generate` writes it, so the
// seed rules, the `tile` search and the policy apply to it as to a generated benchmark.
#pragma once

#include <optional>

#include "looptool/ir/ir.h"
#include "looptool/ir/loop_tree.h"

namespace looptool {

/// The roles of a matmul C[m, n] (+)= A[m, k] * B[k, n], or of a batched one over one or two
/// batch variables, each tensor's dimensions in any order (attention's S[b, h, i, j] += Q[b, i, h,
/// d] * K[b, j, h, d]: batches b and h, m = i, n = j, k = d): variable and tensor indices. m is
/// the output's first variable of the two that are not batches. `temp` is the temporary of the
/// two-statement form, -1 in the one-statement form; `batch` -1 for a plain matmul, `batch2` -1
/// unless there are two batch variables (in the output's order).
struct MatmulRoles {
    int m = 0, n = 0, k = 0;
    int a = 0, b = 0, out = 0, temp = -1;
    int batch = -1, batch2 = -1;
};

/// c's roles when it is a matmul in either form: one statement C[..] += A[..] * B[..], or
/// T[..] += A[..] * B[..] then C[..] = T[..]; each access one variable per dimension covering
/// it (in any order), a batch variable in all three, m in C and A, n in C and B, k in A and B,
/// the product's operands in either order, no other tensor.
std::optional<MatmulRoles> matmul_roles(const Computation &c);

/// c's roles when it is already in generate's form: two statements, the product's operands
/// A then B, variables declared m, k, n (so its naive nest is generate's: m, k, n then m, n),
/// batch variables first (make_bmm, make_scores, make_context).
std::optional<MatmulRoles> generated_matmul(const Computation &c);

/// The roles of a conv2d Y[n, m, ho, wo] (+)= X[n, c, s ho + kh, s wo + kw] * W[m, c, kh, kw] in
/// either form (one statement, or a temporary and a copy), operands either way round. Padded:
/// X is a temporary that a first statement fills with the input, zeros around it (a sum
/// reduction's output starts at 0): X[n', c', h + pad_h, w + pad_w] += In[n', c', h, w], X of
/// In's shape plus 2 pad_h rows and 2 pad_w columns; pad_stmt 0, `input` In, h and wv its
/// variables (n' and c' as n and c, or other variables of their extents).
struct ConvRoles {
    int n = 0, c = 0, ho = 0, wo = 0, kh = 0, kw = 0, m = 0;
    int x = 0, w = 0, out = 0, temp = -1;
    int pad_stmt = -1, input = -1, h = -1, wv = -1;
    int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};
std::optional<ConvRoles> conv_roles(const Computation &c);

/// A conv2d's sizes as a library takes them: images, input channels, input rows and columns
/// (unpadded), output channels, kernel rows and columns, one stride and one padding for rows and
/// columns; `roles` where they come from.
struct ConvParams {
    int64_t n = 0, ci = 0, h = 0, w = 0, co = 0, kh = 0, kw = 0, stride = 1, pad = 0;
    ConvRoles roles;
};
/// c's sizes when it is a conv2d (conv_roles) with the same stride and padding along rows and
/// columns; nullopt otherwise.
std::optional<ConvParams> conv_params(const Computation &c);

/// c rewritten in generate's form when it is a matmul or a conv2d in another form (a conv's
/// variables declared n, c, ho, wo, kh, kw, m as make_conv2d's, then a padded one's h, w as
/// make_padded_conv2d's, its padding statement first; a matmul's m, k, n), names
/// kept, a temporary (named T, or T plus a digit when taken) before C
/// unless it has one, the product as A * B. The same function of the same arguments: the
/// inputs and outputs keep their names, shapes and order. nullopt when c is not a matmul or
/// is already in that form.
std::optional<Computation> generated_form(const Computation &c);

/// Where tune and the searches start on a benchmark: the naive nest of its generated form
/// when it has one, else of its own computation.
Program tuning_start(const Program &file);

}  // namespace looptool
