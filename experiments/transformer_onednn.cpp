// oneDNN's side of the transformer layer (transformer_layer.h): its primitives bound to the
// layer's tensors, group by group.
#include <fmt/format.h>

#include "baselines/onednn_primitive.h"
#include "baselines/onednn_rowop.h"
#include "experiments/transformer_layer.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"

namespace looptune {

using looptool::Computation;
using looptool::LayerOp;

namespace {

using Prim = std::unique_ptr<bench::OnednnPrimitive>;

struct Group {
    std::string name, description;
    std::vector<Prim> prims;
};

const std::vector<bench::OnednnPrimitive *> *g_sequence = nullptr;

void sequence_kernel(float *const *, const volatile int32_t *) {
    for (bench::OnednnPrimitive *p : *g_sequence) p->run();
}

int64_t rows_of(const Computation &c) { return c.vars[0].extent; }
int64_t cols_of(const Computation &c) { return c.vars[1].extent; }

}  // namespace

struct OnednnLayer::Impl {
    LayerTensors &t;
    std::vector<Group> groups;
    Computation unit = looptool::make_bias_add(1, 1, false, "sequence");
    looptool::Buffers unit_buffers = looptool::make_buffers(unit, 1);

    explicit Impl(LayerTensors &tensors) : t(tensors) {}
    float *at(const std::string &name) { return t.at(name).data(); }
    Group &group(const std::string &name) {
        if (groups.empty() || groups.back().name != name) groups.push_back({name, "", {}});
        return groups.back();
    }
    void add(Group &g, Prim p, const std::vector<std::string> &names, const std::string &what) {
        std::vector<float *> ptrs;
        for (const std::string &n : names) ptrs.push_back(at(n));
        p->bind(ptrs);
        g.description += (g.description.empty() ? "" : " + ") + what;
        g.prims.push_back(std::move(p));
    }
    // The op's primitives, added to its group.
    void wire(const LayerOp &op);
};

void OnednnLayer::Impl::wire(const LayerOp &op) {
    const Computation &c = op.comp;
    Group &g = group(op.group);
    // A projection with its epilogue: matmul with its bias argument, then the residual add or
    // GELU as their own primitives, through an intermediate of the matmul's output.
    if (const auto e = looptool::matmul_epilogue(c); e && e->epilogue.bias) {
        const auto m = bench::strided_matmul(looptool::make_matmul(e->m, e->n, e->k));
        const bool act = e->epilogue.act == looptool::Activation::Gelu, res = e->epilogue.residual;
        if (!m || (e->epilogue.act != looptool::Activation::None && !act)) {
            g.description += fmt::format("no oneDNN primitive wired for {}", c.name);
            return;
        }
        const std::string mid = act || res ? op.writes + "_matmul" : op.writes;
        t.emplace(mid, looptool::TensorData(size_t(e->m * e->n), 0.f));
        add(g, bench::onednn_matmul(*m, true), {op.reads[0], op.reads[1], op.reads[2], mid},
            "matmul+bias");
        if (res) add(g, bench::onednn_add(e->m, e->n), {mid, op.reads[3], op.writes}, "add");
        if (act) add(g, bench::onednn_gelu(e->m, e->n), {mid, op.writes}, "gelu");
    } else if (const auto m = bench::strided_matmul(c)) {
        add(g, bench::onednn_matmul(*m, false), {op.reads[0], op.reads[1], op.writes}, "matmul");
    } else if (bench::is_softmax(c)) {
        add(g, bench::onednn_softmax(rows_of(c), cols_of(c)), {op.reads[0], op.writes}, "softmax");
    } else if (bench::is_layernorm(c)) {
        add(g, bench::onednn_layernorm(rows_of(c), cols_of(c)),
            {op.reads[0], op.reads[1], op.reads[2], op.writes}, "layernorm");
    } else {
        g.description += (g.description.empty() ? "" : " + ") +
                         fmt::format("no oneDNN primitive wired for {}", c.name);
    }
}

OnednnLayer::OnednnLayer(const looptool::TransformerShape &, const std::vector<LayerOp> &ops,
                         LayerTensors &t)
    : impl_(std::make_unique<Impl>(t)) {
    for (const auto &[name, n] : layer_tensor_sizes(ops))
        if (!t.count(name)) t[name] = looptool::TensorData(size_t(n), 0.f);
    for (const LayerOp &op : ops) impl_->wire(op);
}

OnednnLayer::~OnednnLayer() = default;

std::vector<std::string> OnednnLayer::groups() const {
    std::vector<std::string> out;
    for (const Group &g : impl_->groups) out.push_back(g.name);
    return out;
}

std::string OnednnLayer::description(const std::string &group) const {
    for (const Group &g : impl_->groups)
        if (g.name == group) return g.description;
    throw looptool::Error(fmt::format("no layer group '{}'", group));
}

namespace {
std::vector<bench::OnednnPrimitive *> sequence_of(const std::vector<Group> &groups,
                                                  const std::string &group) {
    std::vector<bench::OnednnPrimitive *> seq;
    for (const Group &g : groups)
        if (group.empty() || g.name == group)
            for (const Prim &p : g.prims) seq.push_back(p.get());
    return seq;
}
}  // namespace

void OnednnLayer::run_group(const std::string &group) {
    for (bench::OnednnPrimitive *p : sequence_of(impl_->groups, group)) p->run();
}

void OnednnLayer::run_all() { run_group(""); }

double OnednnLayer::seconds(const std::string &group) {
    const std::vector<bench::OnednnPrimitive *> seq = sequence_of(impl_->groups, group);
    if (seq.empty()) return 0;
    struct Active {  // the kernel's global, cleared however the measurement ends
        explicit Active(const std::vector<bench::OnednnPrimitive *> *s) { g_sequence = s; }
        ~Active() { g_sequence = nullptr; }
    } active(&seq);
    return looptool::measure_kernel_uncut(sequence_kernel, impl_->unit, impl_->unit_buffers)
        .median_s;
}

}  // namespace looptune
