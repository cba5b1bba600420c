#include "experiments/transformer_layer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "baselines/onednn_primitive.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"
#include "tune/guided_search.h"
#include "tune/policy.h"
#include "util/stats.h"

namespace looptune {

using looptool::Computation;
using looptool::Error;
using looptool::LayerOp;
using looptool::TensorData;

std::map<std::string, int64_t> layer_tensor_sizes(const std::vector<LayerOp> &ops) {
    std::map<std::string, int64_t> sizes;
    auto note = [&](const std::string &name, const looptool::Tensor &t) {
        int64_t n = 1;
        for (int64_t e : t.shape) n *= e;
        auto [it, added] = sizes.emplace(name, n);
        if (!added && it->second != n)
            throw Error(fmt::format("layer tensor {}: {} elements in one op, {} in another", name,
                                    it->second, n));
    };
    for (const LayerOp &op : ops) {
        size_t r = 0;
        for (const looptool::Tensor &t : op.comp.tensors) {
            if (t.kind == looptool::TensorKind::Input) note(op.reads.at(r++), t);
            if (t.kind == looptool::TensorKind::Output) note(op.writes, t);
        }
    }
    return sizes;
}

LayerTensors layer_inputs(const looptool::TransformerShape &s, const std::vector<LayerOp> &ops,
                          uint64_t seed) {
    std::set<std::string> written;
    for (const LayerOp &op : ops) written.insert(op.writes);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    LayerTensors t;
    for (const auto &[name, n] : layer_tensor_sizes(ops)) {
        if (written.count(name)) continue;
        float scale = 1, offset = 0;
        // A weight is K x N: scaled by 1/sqrt(K), its fan-in.
        if (name[0] == 'w') scale = 1.f / std::sqrt(float(name == "w2" ? s.ffn : s.hidden));
        if (name[0] == 'b' || name[0] == 'c') scale = 0.1f;
        if (name[0] == 'g') scale = 0.1f, offset = 1;
        if (name == "wq" || name == "bq") scale /= std::sqrt(float(s.head_dim()));
        TensorData d(static_cast<size_t>(n));
        for (float &v : d) v = offset + scale * u(rng);
        t[name] = std::move(d);
    }
    return t;
}

void run_layer(const std::vector<LayerOp> &ops, const std::vector<looptool::Program> &programs,
               LayerTensors &t, bool interpret) {
    if (programs.size() != ops.size())
        throw Error(fmt::format("run_layer: {} programs for {} ops", programs.size(), ops.size()));
    auto jit = interpret ? nullptr : looptool::Jit::create();
    for (size_t i = 0; i < ops.size(); ++i) {
        const Computation &c = ops[i].comp;
        looptool::Buffers b = looptool::make_buffers(c, 1);
        size_t r = 0;
        int out = -1;
        for (size_t k = 0; k < c.tensors.size(); ++k) {
            if (c.tensors[k].kind == looptool::TensorKind::Output) out = int(k);
            if (c.tensors[k].kind != looptool::TensorKind::Input) continue;
            const TensorData &in = t.at(ops[i].reads.at(r++));
            if (in.size() != b.data[k].size())
                throw Error(fmt::format("{}: layer tensor {} has {} elements, not {}", c.name,
                                        ops[i].reads[r - 1], in.size(), b.data[k].size()));
            b.data[k] = in;
        }
        if (interpret) {
            looptool::run_schedule(programs[i], b);
        } else {
            const int32_t cancel = 0;
            auto ptrs = b.pointers();
            jit->compile(programs[i]).fn(ptrs.data(), &cancel);
        }
        t[ops[i].writes] = std::move(b.data[size_t(out)]);
    }
}

TensorDiff tensor_diff(const LayerTensors &a, const LayerTensors &b, const std::string &name) {
    const TensorData &x = a.at(name), &y = b.at(name);
    if (x.size() != y.size())
        throw Error(fmt::format("tensor {}: {} and {} elements", name, x.size(), y.size()));
    TensorDiff d;
    for (size_t i = 0; i < x.size(); ++i) {
        d.max_abs_diff = std::max(d.max_abs_diff, double(std::fabs(x[i] - y[i])));
        d.max_abs = std::max(d.max_abs, double(std::fabs(y[i])));
        if (std::isnan(x[i]) != std::isnan(y[i])) d.max_abs_diff = INFINITY;
    }
    return d;
}

namespace {

bool selected(const LayerRunConfig &c, const std::string &group) {
    return c.groups.empty() || std::find(c.groups.begin(), c.groups.end(), group) != c.groups.end();
}

// Each op's program: tune's guided search from its naive nest (verified), or the naive nest.
std::vector<looptool::Program> tuned_programs(const std::vector<LayerOp> &ops,
                                              const LayerRunConfig &c, std::vector<OpFigure> &f) {
    std::vector<looptool::Program> out;
    std::optional<Policy> policy;
    std::unique_ptr<Environment> env;
    if (c.tune) {
        policy.emplace(Policy::load(c.policy.empty() ? default_policy_path() : c.policy));
        EnvConfig base;
        base.store_path = c.store;
        env = std::make_unique<Environment>(policy->env_config(base));
    }
    for (const LayerOp &op : ops) {
        OpFigure fig{op.comp.name, op.group, "naive", op.epilogue};
        looptool::Program p =
            looptool::Program::naive(std::make_shared<const Computation>(op.comp));
        if (c.tune && selected(c, op.group)) {
            GuidedConfig g;
            g.budget_s = c.budget_s;
            const GuidedResult r = guided_search(*policy, *env, p, g);
            const looptool::Comparison cmp = env->verify(r.best);
            if (!cmp.ok)
                throw Error(fmt::format("{}: the tuned schedule failed verification: {}",
                                        op.comp.name, cmp.first_mismatch));
            p = r.best;
            // Fused: a nest shares loops with its epilogue (not a packed block's copy).
            for (const looptool::Nest &n : p.tree.nests) {
                const looptool::Statement &st = p.comp->stmts[size_t(n.stmts[0])];
                fig.fused |= n.shared > 0 && p.comp->tensors[size_t(st.out.tensor)].kind !=
                                                 looptool::TensorKind::Scratch;
            }
            fig.found_by = r.found_by.empty() ? "start" : r.found_by;
            fig.actions = int(r.actions.size());
        }
        out.push_back(p);
        f.push_back(fig);
    }
    return out;
}

// Median seconds of one call of p's kernel, the full protocol.
double kernel_seconds(looptool::Jit &jit, const looptool::Program &p) {
    looptool::Buffers b = looptool::make_buffers(*p.comp, 1);
    return looptool::measure_kernel_uncut(jit.compile(p).fn, *p.comp, b).median_s;
}

}  // namespace

LayerFigures run_transformer_layer(const looptool::TransformerShape &s, const LayerRunConfig &c) {
    if (c.rounds < 1) throw Error(fmt::format("transformer layer: {} rounds", c.rounds));
    const std::vector<LayerOp> ops = looptool::transformer_layer(s);
    for (const std::string &g : c.groups)
        if (std::none_of(ops.begin(), ops.end(), [&](const LayerOp &o) { return o.group == g; }))
            throw Error(fmt::format("transformer layer: no group '{}'", g));
    LayerFigures out;
    out.shape = s.name;
    const std::vector<looptool::Program> programs = tuned_programs(ops, c, out.ops);
    LayerTensors ours = layer_inputs(s, ops, 5), theirs = ours;
    OnednnLayer dnn(s, ops, theirs);
    run_layer(ops, programs, ours);
    dnn.run_all();
    out.output = tensor_diff(ours, theirs, "y");
    // Alternating rounds: every kernel of ours, then oneDNN's groups and its whole sequence.
    auto jit = looptool::Jit::create();
    std::vector<std::vector<double>> op_s(ops.size()), group_s(dnn.groups().size());
    std::vector<double> chain_s;
    for (int round = 0; round < c.rounds; ++round) {
        for (size_t i = 0; i < ops.size(); ++i)
            if (selected(c, ops[i].group)) op_s[i].push_back(kernel_seconds(*jit, programs[i]));
        for (size_t g = 0; g < group_s.size(); ++g)
            if (selected(c, dnn.groups()[g])) group_s[g].push_back(dnn.seconds(dnn.groups()[g]));
        if (c.groups.empty()) chain_s.push_back(dnn.seconds(""));
    }
    for (size_t i = 0; i < ops.size(); ++i) {
        if (op_s[i].empty()) continue;
        out.ops[i].seconds = median(op_s[i]);
        out.ours_s += out.ops[i].seconds;
    }
    for (size_t g = 0; g < group_s.size(); ++g) {
        if (group_s[g].empty()) continue;
        GroupFigure gf{dnn.groups()[g], dnn.description(dnn.groups()[g]), 0, median(group_s[g])};
        for (const OpFigure &o : out.ops)
            if (o.group == gf.group) gf.ours_s += o.seconds;
        out.onednn_s += gf.onednn_s;
        out.groups.push_back(gf);
    }
    out.onednn_chain_s = chain_s.empty() ? 0 : median(chain_s);
    std::erase_if(out.ops, [&](const OpFigure &o) { return !selected(c, o.group); });
    return out;
}

}  // namespace looptune
