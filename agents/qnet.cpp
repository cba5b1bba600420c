#include "agents/qnet.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>

#include "looptool/error.h"

namespace looptune {
namespace nn = torch::nn;

QNetImpl::QNetImpl(const QNetConfig &config) : config_(config) {
    const int H = config.hidden;
    if (config.encoder == "mlp") {
        mlp_ = register_module("mlp", nn::Sequential(nn::Linear(config.shape.flat_size(), H), nn::ReLU(),
                                                     nn::Linear(H, H), nn::ReLU()));
    } else if (config.encoder == "gnn") {
        const int G = config.gnn_hidden;
        node_in_ = register_module("node_in", nn::Linear(kGraphVertexFeatures, G));
        for (int r = 0; r < config.gnn_rounds; ++r) {
            self_.push_back(register_module("self" + std::to_string(r), nn::Linear(G, G)));
            down_.push_back(register_module("down" + std::to_string(r), nn::Linear(G, G)));
            up_.push_back(register_module("up" + std::to_string(r), nn::Linear(G, G)));
        }
        globals_in_ = register_module("globals_in", nn::Linear(config.shape.globals_size(), G));
        readout_ = register_module("readout", nn::Linear(3 * G, H));
    } else {
        throw looptool::Error("unknown encoder '" + config.encoder + "' (expected mlp or gnn)");
    }
    const int A = config.shape.num_actions;
    value_ = register_module("value", nn::Sequential(nn::Linear(H, H / 2), nn::ReLU(), nn::Linear(H / 2, 1)));
    advantage_ = register_module("advantage", nn::Sequential(nn::Linear(H, H / 2), nn::ReLU(), nn::Linear(H / 2, A)));
}

static torch::Tensor stack_flat(const std::vector<const RlState *> &states, int64_t offset, int64_t width,
                                torch::Device device) {
    const int64_t B = static_cast<int64_t>(states.size());
    torch::Tensor t = torch::empty({B, width}, torch::kFloat32);
    float *out = t.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b) {
        if (static_cast<int64_t>(states[b]->flat.size()) != offset + width)
            throw looptool::Error("state has " + std::to_string(states[b]->flat.size()) +
                                  " features, the network expects " + std::to_string(offset + width));
        std::copy_n(states[b]->flat.data() + offset, width, out + b * width);
    }
    return t.to(device);
}

torch::Tensor QNetImpl::encode_mlp(const std::vector<const RlState *> &states) {
    const torch::Device device = value_->parameters().front().device();
    return mlp_->forward(stack_flat(states, 0, config_.shape.flat_size(), device));
}

// Message passing over the loop tree: each round a vertex combines itself with the mean of its
// parent's and its children's embeddings; the readout is the mean over vertices, the cursor
// loop's embedding and the global features (strides, previous actions, steps left).
torch::Tensor QNetImpl::encode_gnn(const std::vector<const RlState *> &states) {
    const torch::Device device = value_->parameters().front().device();
    const int64_t B = static_cast<int64_t>(states.size());
    std::vector<float> feats;
    std::vector<int64_t> src, dst, graph_of;
    int64_t base = 0;
    for (int64_t b = 0; b < B; ++b) {
        const DenseGraph &g = states[b]->graph;
        if (g.num_vertices == 0) throw looptool::Error("the gnn encoder needs states encoded with their graph");
        feats.insert(feats.end(), g.features.begin(), g.features.end());
        for (auto [s, t] : g.edges) {
            src.push_back(base + s);
            dst.push_back(base + t);
        }
        for (int v = 0; v < g.num_vertices; ++v) graph_of.push_back(b);
        base += g.num_vertices;
    }
    const int64_t N = base;
    auto longs = [&](std::vector<int64_t> &v) {
        return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}, torch::kInt64).clone().to(device);
    };
    torch::Tensor x = torch::from_blob(feats.data(), {N, kGraphVertexFeatures}, torch::kFloat32).clone().to(device);
    torch::Tensor s = longs(src), t = longs(dst), gi = longs(graph_of);
    auto ones = torch::ones({static_cast<int64_t>(src.size()), 1}, x.options());
    torch::Tensor in_deg = torch::zeros({N, 1}, x.options()).index_add_(0, t, ones).clamp_min(1);
    torch::Tensor out_deg = torch::zeros({N, 1}, x.options()).index_add_(0, s, ones).clamp_min(1);
    torch::Tensor h = torch::relu(node_in_->forward(x));
    for (size_t r = 0; r < self_.size(); ++r) {
        torch::Tensor from_parent = torch::zeros_like(h).index_add_(0, t, h.index_select(0, s)) / in_deg;
        torch::Tensor from_children = torch::zeros_like(h).index_add_(0, s, h.index_select(0, t)) / out_deg;
        h = h + torch::relu(self_[r]->forward(h) + down_[r]->forward(from_parent) + up_[r]->forward(from_children));
    }
    const int64_t G = h.size(1);
    torch::Tensor counts = torch::zeros({B, 1}, x.options()).index_add_(0, gi, torch::ones({N, 1}, x.options()));
    torch::Tensor mean = torch::zeros({B, G}, x.options()).index_add_(0, gi, h) / counts.clamp_min(1);
    constexpr int kCursorFeature = 8;  // see kGraphVertexFeatures in env/graph_observation.h
    torch::Tensor cursor = torch::zeros({B, G}, x.options())
                               .index_add_(0, gi, h * x.index({torch::indexing::Slice(), kCursorFeature}).unsqueeze(1));
    torch::Tensor globals = torch::relu(globals_in_->forward(
        stack_flat(states, config_.shape.loops_size(), config_.shape.globals_size(), device)));
    return torch::relu(readout_->forward(torch::cat({mean, cursor, globals}, 1)));
}

torch::Tensor QNetImpl::forward(const std::vector<const RlState *> &states) {
    torch::Tensor z = config_.encoder == "mlp" ? encode_mlp(states) : encode_gnn(states);
    torch::Tensor a = advantage_->forward(z);
    return value_->forward(z) + a - a.mean(1, /*keepdim=*/true);
}

torch::Tensor mask_tensor(const std::vector<const RlState *> &states, torch::Device device) {
    const int64_t B = static_cast<int64_t>(states.size());
    const int64_t A = B ? static_cast<int64_t>(states[0]->mask.size()) : 0;
    torch::Tensor m = torch::zeros({B, A}, torch::kBool);
    bool *p = m.data_ptr<bool>();
    for (int64_t b = 0; b < B; ++b)
        for (int64_t a = 0; a < A; ++a) p[b * A + a] = states[b]->mask[a] != 0;
    return m.to(device);
}

torch::Tensor masked(const torch::Tensor &q, const torch::Tensor &mask) {
    return q.masked_fill(mask.logical_not(), -1e9);
}

std::string qnet_config_json(const QNetConfig &c) {
    nlohmann::json j = {{"encoder", c.encoder},        {"hidden", c.hidden},
                        {"gnn_hidden", c.gnn_hidden},  {"gnn_rounds", c.gnn_rounds},
                        {"max_loops", c.shape.max_loops}, {"num_actions", c.shape.num_actions}};
    return j.dump();
}

QNetConfig qnet_config_from_json(const std::string &text) {
    try {
        nlohmann::json j = nlohmann::json::parse(text);
        QNetConfig c;
        c.encoder = j.at("encoder").get<std::string>();
        c.hidden = j.at("hidden").get<int>();
        c.gnn_hidden = j.at("gnn_hidden").get<int>();
        c.gnn_rounds = j.at("gnn_rounds").get<int>();
        c.shape.max_loops = j.at("max_loops").get<int>();
        c.shape.num_actions = j.at("num_actions").get<int>();
        return c;
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(std::string("bad network description: ") + e.what());
    }
}

void copy_weights(QNet &to, const QNet &from) {
    torch::NoGradGuard no_grad;
    auto src = from->named_parameters();
    for (auto &p : to->named_parameters()) p.value().copy_(src[p.key()]);
    auto srcb = from->named_buffers();
    for (auto &b : to->named_buffers()) b.value().copy_(srcb[b.key()]);
}

}  // namespace looptune

namespace looptune {

int greedy_action(QNet &net, const RlState &s) {
    if (!any_legal(s)) return -1;
    torch::NoGradGuard no_grad;
    std::vector<const RlState *> batch{&s};
    torch::Device device = net->parameters().front().device();
    torch::Tensor q = masked(net->forward(batch), mask_tensor(batch, device));
    return static_cast<int>(q.argmax(1).item<int64_t>());
}

void save_policy_file(const std::string &path, QNet &net, const std::string &meta_json) {
    torch::serialize::OutputArchive archive, weights;
    net->save(weights);
    archive.write("weights", weights);
    archive.write("meta", c10::IValue(meta_json));
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    archive.save_to(tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw looptool::Error("cannot write " + path);
    }
}

QNet load_policy_file(const std::string &path, std::string *meta_json) {
    if (FILE *f = std::fopen(path.c_str(), "rb")) {
        std::fclose(f);
    } else {
        throw looptool::Error("cannot open policy file " + path);
    }
    try {
        torch::serialize::InputArchive archive, weights;
        archive.load_from(path);
        c10::IValue meta;
        archive.read("meta", meta);
        const std::string json = meta.toStringRef();
        nlohmann::json j = nlohmann::json::parse(json);
        QNet net(qnet_config_from_json(j.at("network").dump()));
        archive.read("weights", weights);
        net->load(weights);
        net->eval();
        if (meta_json) *meta_json = json;
        return net;
    } catch (const looptool::InternalError &) {
        throw;  // a bug of ours, not a bad file
    } catch (const looptool::Error &e) {
        throw looptool::Error(path + ": not a looptune policy file: " + e.what());
    } catch (const std::exception &e) {
        throw looptool::Error(path + ": not a looptune policy file (" +
                              std::string(e.what()).substr(0, 200) + ")");
    }
}

}  // namespace looptune
