#include "policy/plain_qnet.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "env/observations.h"
#include "looptool/ir/error.h"

namespace looptune {
namespace {

// Cloned for AVX-512 and AVX2 (the project builds for baseline x86-64), as rl/dense_qnet.cpp's
// elementwise loops are.
#define LT_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// y[0, out) += sum over the non-zero x[i] of x[i] * wt[i, 0, out): a zero input adds nothing.
LT_VECTOR_CLONES void accumulate_rows(const float *x, int64_t in, const float *wt, int64_t out,
                                      float *y) {
    for (int64_t i = 0; i < in; ++i) {
        const float xi = x[i];
        if (xi == 0.f) continue;
        const float *w = wt + i * out;
        for (int64_t o = 0; o < out; ++o) y[o] += xi * w[o];
    }
}

void relu(float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = std::max(y[i], 0.f);
}

int positive_field(const nlohmann::json &j, const char *key, int min) {
    const nlohmann::json &v = j.at(key);
    // The sizes stay far below what a product of two of them could overflow.
    constexpr int64_t kMax = 1 << 20;
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > kMax)
        throw looptool::Error(
            fmt::format("network {} {} is not an integer in [{}, {}]", key, v.dump(), min, kMax));
    return v.get<int>();
}

}  // namespace

int NetworkConfig::globals_size() const {
    return kStrideBuckets + kPrevActions * num_actions + 1 + machine_features;
}
int NetworkConfig::flat_size() const { return max_loops * kLoopFeatures + globals_size(); }

NetworkConfig network_config_from_json(const std::string &text) {
    try {
        const nlohmann::json j = nlohmann::json::parse(text);
        NetworkConfig c;
        c.encoder = j.at("encoder").get<std::string>();
        if (c.encoder != "mlp" && c.encoder != "gnn")
            throw looptool::Error("unknown encoder '" + c.encoder + "' (expected mlp or gnn)");
        c.hidden = positive_field(j, "hidden", 2);
        c.gnn_hidden = positive_field(j, "gnn_hidden", 1);
        c.gnn_rounds = positive_field(j, "gnn_rounds", 0);
        c.max_loops = positive_field(j, "max_loops", 1);
        c.num_actions = positive_field(j, "num_actions", 1);
        if (j.contains("machine_features")) {
            const nlohmann::json &m = j.at("machine_features");
            if (m != 0 && m != kMachineFeatures)
                throw looptool::Error(fmt::format("network machine_features {} is not 0 or {}",
                                                  m.dump(), kMachineFeatures));
            c.machine_features = m.get<int>();
        }
        return c;
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(std::string("bad network description: ") + e.what());
    }
}

NetworkConfig network_config_of(const PolicyFile &file) {
    nlohmann::json meta;
    try {
        meta = nlohmann::json::parse(file.meta_json);
        meta = meta.at("network");
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(std::string("bad policy description: ") + e.what());
    }
    return network_config_from_json(meta.dump());
}

std::vector<std::pair<std::string, std::vector<int64_t>>> network_tensors(const NetworkConfig &c) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> t;
    const auto linear = [&](const std::string &name, int64_t in, int64_t out) {
        t.push_back({name + ".weight", {out, in}});
        t.push_back({name + ".bias", {out}});
    };
    const int64_t H = c.hidden, G = c.gnn_hidden;
    if (c.encoder == "mlp") {
        linear("mlp.0", c.flat_size(), H);
        linear("mlp.2", H, H);
    } else {
        linear("node_in", kGraphVertexFeatures, G);
        for (int r = 0; r < c.gnn_rounds; ++r)
            for (const char *kind : {"self", "down", "up"}) linear(kind + std::to_string(r), G, G);
        linear("globals_in", c.globals_size(), G);
        linear("readout", 3 * G, H);
    }
    linear("value.0", H, H / 2);
    linear("value.2", H / 2, 1);
    linear("advantage.0", H, H / 2);
    linear("advantage.2", H / 2, c.num_actions);
    return t;
}

void PlainQNet::Linear::apply(const float *x, float *y, bool with_relu) const {
    std::copy(b.begin(), b.end(), y);
    accumulate_rows(x, in, wt.data(), out, y);
    if (with_relu) relu(y, out);
}

PlainQNet::Linear PlainQNet::layer(const PolicyFile &file, const std::string &name) const {
    const PolicyTensor *w = file.find(name + ".weight"), *b = file.find(name + ".bias");
    LT_CHECK(w && b, "PlainQNet: tensors checked before binding");
    Linear l;
    l.out = w->shape[0];
    l.in = w->shape[1];
    l.b = b->data;
    l.wt.resize(w->data.size());
    for (int64_t o = 0; o < l.out; ++o)
        for (int64_t i = 0; i < l.in; ++i)
            l.wt[size_t(i * l.out + o)] = w->data[size_t(o * l.in + i)];
    return l;
}

PlainQNet::PlainQNet(const NetworkConfig &config, const PolicyFile &file) : config_(config) {
    const auto want = network_tensors(config);
    for (const auto &[name, shape] : want) {
        const PolicyTensor *t = file.find(name);
        if (!t) throw looptool::Error("no tensor " + name + " (the network needs it)");
        if (t->shape != shape)
            throw looptool::Error(fmt::format("tensor {} has shape [{}], the network needs [{}]",
                                              name, fmt::join(t->shape, ", "),
                                              fmt::join(shape, ", ")));
    }
    for (const PolicyTensor &t : file.tensors)
        if (std::none_of(want.begin(), want.end(),
                         [&](const auto &w) { return w.first == t.name; }))
            throw looptool::Error("tensor " + t.name + " is not part of a " + config.encoder +
                                  " network");
    if (config.encoder == "mlp") {
        mlp_ = {layer(file, "mlp.0"), layer(file, "mlp.2")};
    } else {
        node_in_ = layer(file, "node_in");
        for (int r = 0; r < config.gnn_rounds; ++r) {
            self_.push_back(layer(file, "self" + std::to_string(r)));
            down_.push_back(layer(file, "down" + std::to_string(r)));
            up_.push_back(layer(file, "up" + std::to_string(r)));
        }
        globals_in_ = layer(file, "globals_in");
        readout_ = layer(file, "readout");
    }
    value1_ = layer(file, "value.0");
    value2_ = layer(file, "value.2");
    adv1_ = layer(file, "advantage.0");
    adv2_ = layer(file, "advantage.2");
}

// Message passing as rl/dense_qnet.cpp's forward_gnn, over one state's loop tree.
std::vector<float> PlainQNet::encode_gnn(const std::vector<float> &flat,
                                         const DenseGraph &g) const {
    constexpr int V = kGraphVertexFeatures;
    constexpr int kCursorFeature = 8;  // as in QNetImpl::encode_gnn
    const int64_t N = g.num_vertices, G = config_.gnn_hidden;
    if (N == 0 || g.features.size() != size_t(N * V))
        throw looptool::Error("the gnn encoder needs states encoded with their graph");
    std::vector<float> inv_in(size_t(N), 0.f), inv_out(size_t(N), 0.f);
    for (auto [s, t] : g.edges) {
        if (s < 0 || t < 0 || s >= N || t >= N)
            throw looptool::Error("a graph edge names a vertex the graph does not have");
        ++inv_in[size_t(t)];
        ++inv_out[size_t(s)];
    }
    for (int64_t v = 0; v < N; ++v) {
        inv_in[size_t(v)] = 1.f / std::max(inv_in[size_t(v)], 1.f);
        inv_out[size_t(v)] = 1.f / std::max(inv_out[size_t(v)], 1.f);
    }
    std::vector<float> h(size_t(N * G)), mp(h.size()), mc(h.size()), act(h.size());
    for (int64_t v = 0; v < N; ++v)
        node_in_.apply(&g.features[size_t(v * V)], &h[size_t(v * G)], true);
    for (size_t r = 0; r < self_.size(); ++r) {
        std::fill(mp.begin(), mp.end(), 0.f);
        std::fill(mc.begin(), mc.end(), 0.f);
        for (auto [s, t] : g.edges)
            for (int64_t j = 0; j < G; ++j) {
                mp[size_t(t * G + j)] += h[size_t(s * G + j)];
                mc[size_t(s * G + j)] += h[size_t(t * G + j)];
            }
        for (int64_t v = 0; v < N; ++v) {
            float *a = &act[size_t(v * G)];
            for (int64_t j = 0; j < G; ++j) {
                mp[size_t(v * G + j)] *= inv_in[size_t(v)];
                mc[size_t(v * G + j)] *= inv_out[size_t(v)];
                a[j] = self_[r].b[size_t(j)] + down_[r].b[size_t(j)] + up_[r].b[size_t(j)];
            }
            accumulate_rows(&h[size_t(v * G)], G, self_[r].wt.data(), G, a);
            accumulate_rows(&mp[size_t(v * G)], G, down_[r].wt.data(), G, a);
            accumulate_rows(&mc[size_t(v * G)], G, up_[r].wt.data(), G, a);
            relu(a, G);
        }
        for (size_t i = 0; i < h.size(); ++i) h[i] += act[i];
    }
    std::vector<float> pooled(size_t(3 * G), 0.f);
    for (int64_t v = 0; v < N; ++v)
        for (int64_t j = 0; j < G; ++j) {
            pooled[size_t(j)] += h[size_t(v * G + j)];
            pooled[size_t(G + j)] +=
                h[size_t(v * G + j)] * g.features[size_t(v * V + kCursorFeature)];
        }
    for (int64_t j = 0; j < G; ++j) pooled[size_t(j)] *= 1.f / float(N);
    const int64_t Gs = config_.globals_size();
    globals_in_.apply(flat.data() + (flat.size() - size_t(Gs)), &pooled[size_t(2 * G)], true);
    std::vector<float> z(size_t(config_.hidden));
    readout_.apply(pooled.data(), z.data(), true);
    return z;
}

std::vector<float> PlainQNet::forward(const std::vector<float> &flat,
                                      const DenseGraph *graph) const {
    if (int64_t(flat.size()) != config_.flat_size())
        throw looptool::Error(fmt::format("state has {} features, the network expects {}",
                                          flat.size(), config_.flat_size()));
    std::vector<float> z;
    if (config_.encoder == "mlp") {
        std::vector<float> h1(size_t(config_.hidden));
        z.resize(h1.size());
        mlp_[0].apply(flat.data(), h1.data(), true);
        mlp_[1].apply(h1.data(), z.data(), true);
    } else {
        if (!graph) throw looptool::Error("the gnn encoder needs states encoded with their graph");
        z = encode_gnn(flat, *graph);
    }
    std::vector<float> hv(size_t(value1_.out)), ha(size_t(adv1_.out)), q(size_t(adv2_.out));
    float v = 0;
    value1_.apply(z.data(), hv.data(), true);
    value2_.apply(hv.data(), &v, false);
    adv1_.apply(z.data(), ha.data(), true);
    adv2_.apply(ha.data(), q.data(), false);
    float mean = 0;  // Q = V + A - mean_a A
    for (float a : q) mean += a;
    mean /= float(q.size());
    for (float &a : q) a += v - mean;
    return q;
}

}  // namespace looptune
