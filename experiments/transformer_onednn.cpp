// oneDNN's side of the transformer layer (transformer_layer.h): its primitives bound to the
// layer's tensors, group by group.
#include <fmt/format.h>

#include "baselines/onednn_primitive.h"
#include "baselines/onednn_rowop.h"
#include "experiments/transformer_layer.h"
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

bool is_bias(const Computation &c, bool residual) {
    return c.vars.size() == 2 &&
           c == looptool::make_bias_add(rows_of(c), cols_of(c), residual, c.name);
}
bool is_bias_gelu(const Computation &c) {
    return c.vars.size() == 2 && c == looptool::make_bias_gelu(rows_of(c), cols_of(c), c.name);
}

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
    // Op i (and the epilogue after a matmul, which it takes): returns the ops consumed.
    size_t wire(const std::vector<LayerOp> &ops, size_t i);
};

size_t OnednnLayer::Impl::wire(const std::vector<LayerOp> &ops, size_t i) {
    const LayerOp &op = ops[i];
    const Computation &c = op.comp;
    Group &g = group(op.group);
    if (const auto m = bench::strided_matmul(c)) {
        const LayerOp *next = i + 1 < ops.size() ? &ops[i + 1] : nullptr;
        const bool plain = next && is_bias(next->comp, false),
                   residual = next && is_bias(next->comp, true),
                   gelu = next && is_bias_gelu(next->comp);
        if (!plain && !residual && !gelu) {
            add(g, bench::onednn_matmul(*m, false), {op.reads[0], op.reads[1], op.writes},
                "matmul");
            return 1;
        }
        const std::string dst = plain ? next->writes : op.writes;
        add(g, bench::onednn_matmul(*m, true), {op.reads[0], op.reads[1], next->reads[1], dst},
            "matmul+bias");
        const int64_t rows = rows_of(next->comp), cols = cols_of(next->comp);
        if (residual)
            add(g, bench::onednn_add(rows, cols), {op.writes, next->reads[2], next->writes}, "add");
        if (gelu) add(g, bench::onednn_gelu(rows, cols), {op.writes, next->writes}, "gelu");
        return 2;
    }
    if (bench::is_softmax(c)) {
        add(g, bench::onednn_softmax(rows_of(c), cols_of(c)), {op.reads[0], op.writes}, "softmax");
    } else if (bench::is_layernorm(c)) {
        add(g, bench::onednn_layernorm(rows_of(c), cols_of(c)),
            {op.reads[0], op.reads[1], op.reads[2], op.writes}, "layernorm");
    } else {
        g.description += (g.description.empty() ? "" : " + ") +
                         fmt::format("no oneDNN primitive wired for {}", c.name);
    }
    return 1;
}

OnednnLayer::OnednnLayer(const looptool::TransformerShape &, const std::vector<LayerOp> &ops,
                         LayerTensors &t)
    : impl_(std::make_unique<Impl>(t)) {
    for (const auto &[name, n] : layer_tensor_sizes(ops))
        if (!t.count(name)) t[name] = looptool::TensorData(size_t(n), 0.f);
    for (size_t i = 0; i < ops.size();) i += impl_->wire(ops, i);
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
