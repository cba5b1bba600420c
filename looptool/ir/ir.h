// The tensor computation: index variables, tensors, and statements over them.
//
// A statement assigns (or accumulates into) one tensor element from an expression of
// reads. Tensor indices are affine in the index variables, so conv2d's `h = ho + kh`
// is the access X[n, c, ho + kh, wo + kw] and needs no special node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace looptool {

struct Var {
    std::string name;
    int64_t extent = 0;
    bool operator==(const Var &) const = default;
};

/// index = offset + sum(coef * var)
struct Affine {
    struct Term {
        int var = 0;
        int64_t coef = 1;
        bool operator==(const Term &) const = default;
    };
    std::vector<Term> terms;
    int64_t offset = 0;

    static Affine of_var(int v) { return Affine{{Term{v, 1}}, 0}; }
    int64_t coef_of(int v) const;
    bool operator==(const Affine &) const = default;
};

/// Scratch: a buffer the kernel allocates itself for each call and frees on return (a `pack`ed
/// copy of an input, docs/actions.md); not an argument, so the caller's buffers, the reference
/// and `same_storage` ignore it. Scratch tensors follow every other tensor.
enum class TensorKind { Input, Output, Temp, Scratch };

struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    TensorKind kind = TensorKind::Input;

    int64_t num_elements() const;
    /// Row-major stride of dimension d, in elements.
    int64_t stride(size_t d) const;
    bool operator==(const Tensor &) const = default;
};

struct Access {
    int tensor = 0;
    std::vector<Affine> index;
    bool operator==(const Access &) const = default;
};

/// The one list of expression ops: X(enumerator, name, arity, infix). `name` is how the text
/// format calls it (`min(a, b)`), `infix` its operator when written between its operands
/// ("" for the call syntax; Read and Const have their own syntax). Names, arities and the
/// parser come from this list; the switches that give an op its meaning (interpreter,
/// lowering, printing) have no `default:`, so -Wswitch names every one a new op misses.
#define LOOPTOOL_OPS(X)      \
    X(Read, "read", 0, "")   \
    X(Const, "const", 0, "") \
    X(Add, "add", 2, "+")    \
    X(Sub, "sub", 2, "-")    \
    X(Mul, "mul", 2, "*")    \
    X(Div, "div", 2, "/")    \
    X(Min, "min", 2, "")     \
    X(Max, "max", 2, "")     \
    X(Neg, "neg", 1, "")     \
    X(Exp, "exp", 1, "")     \
    X(Log, "log", 1, "")     \
    X(Sqrt, "sqrt", 1, "")   \
    X(Abs, "abs", 1, "")     \
    X(Recip, "recip", 1, "") \
    X(Tanh, "tanh", 1, "")   \
    X(Erf, "erf", 1, "")

enum class OpKind {
#define LOOPTOOL_OP_ENUM(op, name, arity, infix) op,
    LOOPTOOL_OPS(LOOPTOOL_OP_ENUM)
#undef LOOPTOOL_OP_ENUM
};

/// Every op, in list order.
const std::vector<OpKind> &all_ops();
int op_arity(OpKind op);  // 0 for Read/Const
const char *op_name(OpKind op);
/// The infix operator ("+"), or "" for ops written as calls and for Read/Const.
const char *op_infix(OpKind op);

struct Expr {
    OpKind op = OpKind::Const;
    Access access;    // Read only
    float value = 0;  // Const only
    std::vector<Expr> args;

    static Expr read(Access a);
    static Expr constant(float v);
    static Expr binary(OpKind op, Expr a, Expr b);
    static Expr unary(OpKind op, Expr a);
    bool operator==(const Expr &) const = default;
};

/// How a statement combines its value into its output element. A reduction (every kind but
/// None) may iterate over variables its output does not use, and its terms may be combined in
/// any order: the three kinds are associative and commutative (Max and Min exactly, Sum up to
/// rounding, which verify.h bounds). Every tensor a reduction writes holds the kind's identity
/// (reduce_identity) when the kernel starts; the statements then run in order.
enum class ReduceKind { None, Sum, Max, Min };

/// out[...] = value                 (ReduceKind::None: no variable beyond the output's)
/// out[...] += value                (ReduceKind::Sum; out starts at 0)
/// out[...] = max(out[...], value)  (ReduceKind::Max; out starts at -inf; NaN terms are
///                                   skipped, as C's fmax and LLVM's maxnum do)
/// out[...] = min(out[...], value)  (ReduceKind::Min; out starts at +inf)
struct Statement {
    Access out;
    ReduceKind reduce = ReduceKind::None;
    Expr value;
    bool operator==(const Statement &) const = default;
};

/// 0 for Sum, -inf for Max, +inf for Min (None: 0, unused).
float reduce_identity(ReduceKind k);
/// "sum", "max", "min" or "none".
const char *reduce_name(ReduceKind k);

struct Computation {
    std::string name;
    std::vector<Var> vars;
    std::vector<Tensor> tensors;
    std::vector<Statement> stmts;

    int var_index(const std::string &name) const;     // -1 if absent
    int tensor_index(const std::string &name) const;  // -1 if absent
    /// The kind of the reductions that write tensor t (validate() allows one kind per
    /// tensor), or None when no reduction writes it.
    ReduceKind reduction_into(int t) const;
    /// Index variables a statement iterates over, in first-use order (output first).
    std::vector<int> stmt_vars(int stmt) const;
    /// Tensors the caller passes (every tensor but the trailing scratch ones): the kernel's
    /// argument array and `Buffers` hold this many.
    size_t num_buffers() const;
    /// Multiply and add count of one execution of every statement (LoopTune's FLOP count).
    double flops() const;
    /// Throws Error naming the first inconsistency (bad var ids, out-of-range accesses,
    /// absurd sizes, an `=` statement over a variable its output does not use, a reduction
    /// reading the tensor it writes, two reduction kinds into one tensor).
    void validate() const;
    bool operator==(const Computation &) const = default;
};

/// Variables an access or a statement uses, in first-use order (a statement's output first).
std::vector<int> vars_of(const Access &a);
std::vector<int> vars_of(const Statement &s);

/// The row-major element offset `a` reaches in its tensor at the var values `idx`.
int64_t flat_index(const Computation &c, const Access &a, const std::vector<int64_t> &idx);

/// Appends the accesses e reads, in evaluation order (left operand first).
void collect_reads(const Expr &e, std::vector<const Access *> &out);
/// True when s's value reads tensor t.
bool reads_tensor(const Statement &s, int t);
/// True when `a` indexes each dimension of its tensor by a distinct var with coefficient 1 and
/// no offset, and that var spans the dimension: an injective map onto every element.
bool is_identity_cover(const Computation &c, const Access &a);
/// True when `a` reaches every element of its tensor exactly once: each dimension is indexed
/// by distinct vars in mixed radix, no offset (a var `pack` cut in two: `32*m_o + m_i`, m_i of
/// extent 32 and the product of the extents the dimension's size). is_identity_cover() implies it.
bool is_exact_cover(const Computation &c, const Access &a);

/// True when `a` and `b` hold the same tensors (names, kinds, element counts, in order; scratch
/// tensors aside): the same buffers serve both. A `flatten` keeps it (it only merges tensor
/// dimensions), and so does a `pack` (its copy is scratch).
bool same_storage(const Computation &a, const Computation &b);

using ComputationPtr = std::shared_ptr<const Computation>;

/// Limits on sizes a user may ask for (a tensor above 2^31 elements is absurd here).
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 31;
inline constexpr int64_t kMaxExtent = int64_t(1) << 20;
/// Largest scratch tensor (a `pack`ed copy, allocated by the kernel on each call): 64 MB.
inline constexpr int64_t kMaxScratchElements = int64_t(1) << 24;

/// C[m,n] = sum_k A[m,k] * B[k,n], written as LoopTune's loop_tool graphs are: the product
/// is reduced into a temporary T and a second statement writes T to the output C.
Computation make_matmul(int64_t m, int64_t n, int64_t k, std::string name = "");

/// Y[n,co,ho,wo] = sum_{ci,kh,kw} X[n,ci,ho+kh,wo+kw] * W[co,ci,kh,kw] (valid padding,
/// stride 1), reduced into T and written to Y like make_matmul.
Computation make_conv2d(int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int64_t kh,
                        int64_t kw, std::string name = "");

/// C[m,n] = A[m,n] + B[m,n].
Computation make_elementwise_add(int64_t m, int64_t n, std::string name = "");

std::string format_affine(const Computation &c, const Affine &a);
std::string format_access(const Computation &c, const Access &a);
std::string format_expr(const Computation &c, const Expr &e);
std::string format_stmt(const Computation &c, const Statement &s);

}  // namespace looptool
