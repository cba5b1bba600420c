// oneDNN's matmul primitive on any matmul the canonical form recognises, its operands read in
// place with their own strides (onednn_primitive.h).
#include <fmt/format.h>

#include "baselines/onednn_primitive.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/ir/error.h"

namespace looptune::bench {

using looptool::Computation;
using looptool::Error;

namespace {

// The stride of variable v in access `a` of a row-major tensor of `shape` (a plain access: one
// variable per dimension).
int64_t stride_of(const looptool::Access &a, const std::vector<int64_t> &shape, int v) {
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
        if (a.index[d].terms[0].var == v) return stride;
        stride *= shape[d];
    }
    throw Error("strided_matmul: a variable the access does not use");
}

}  // namespace

std::optional<StridedMatmul> strided_matmul(const Computation &c) {
    const auto r = looptool::matmul_roles(c);
    if (!r) return std::nullopt;
    const looptool::Statement *product = nullptr;
    for (const looptool::Statement &s : c.stmts)
        if (s.value.op == looptool::OpKind::Mul) product = &s;
    if (!product) return std::nullopt;
    const looptool::Access &x = product->value.args[0].access.tensor == r->a
                                    ? product->value.args[0].access
                                    : product->value.args[1].access;
    const looptool::Access &y = product->value.args[0].access.tensor == r->b
                                    ? product->value.args[0].access
                                    : product->value.args[1].access;
    std::vector<int> batches;
    for (int b : {r->batch, r->batch2})
        if (b >= 0) batches.push_back(b);
    StridedMatmul m;
    m.src = r->a;
    m.wei = r->b;
    m.dst = r->out;
    auto add = [&](std::vector<int64_t> &dims, std::vector<int64_t> &strides,
                   const looptool::Access &a, int tensor, std::vector<int> vars) {
        vars.insert(vars.begin(), batches.begin(), batches.end());
        for (int v : vars) {
            dims.push_back(c.vars[size_t(v)].extent);
            strides.push_back(stride_of(a, c.tensors[size_t(tensor)].shape, v));
        }
    };
    add(m.src_dims, m.src_strides, x, r->a, {r->m, r->k});
    add(m.wei_dims, m.wei_strides, y, r->b, {r->k, r->n});
    add(m.dst_dims, m.dst_strides, product->out, r->out, {r->m, r->n});
    return m;
}

std::function<double()> onednn_matmul_measurer(const std::string &bench, const Computation &c) {
    const auto m = strided_matmul(c);
    if (!m) throw Error(fmt::format("{}: {} runs only on matmuls", bench, kOnednnMatmul));
    return primitive_measurer(bench, kOnednnMatmul, c, onednn_matmul(*m, false),
                              {m->src, m->wei, m->dst});
}

}  // namespace looptune::bench
