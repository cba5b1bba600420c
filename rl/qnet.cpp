#include "rl/qnet.h"

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>

#include "looptool/ir/error.h"
#include "rl/dense_qnet.h"
#include "rl/policy_checksum.h"
#include "rl/torch_errors.h"

namespace looptune {
namespace nn = torch::nn;

QNetImpl::QNetImpl(const QNetConfig &config) : config_(config) {
    const int H = config.hidden;
    if (config.encoder == "mlp") {
        mlp_ = register_module("mlp", nn::Sequential(nn::Linear(config.shape.flat_size(), H),
                                                     nn::ReLU(), nn::Linear(H, H), nn::ReLU()));
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
    value_ = register_module(
        "value", nn::Sequential(nn::Linear(H, H / 2), nn::ReLU(), nn::Linear(H / 2, 1)));
    advantage_ = register_module(
        "advantage", nn::Sequential(nn::Linear(H, H / 2), nn::ReLU(), nn::Linear(H / 2, A)));
}

// Encoded states are mostly zeros (padding loop rows, empty stride buckets, one-hot action
// history): on LoopTune's matmuls 186 of the 508 columns of a batch of 64 are non-zero, so
// the first layer, half the network's FLOPs, shrinks to ~37% of its cost. Skipped for small
// batches (acting), where the gather costs more than it saves, and when most columns are used.
static torch::Tensor nonzero_columns(const float *rows, int64_t B, int64_t width,
                                     torch::Device device) {
    constexpr int64_t kMinRows = 16;
    if (B < kMinRows) return {};
    std::vector<uint8_t> used(width, 0);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t f = 0; f < width; ++f) used[f] |= rows[b * width + f] != 0.f;
    std::vector<int64_t> columns;
    for (int64_t f = 0; f < width; ++f)
        if (used[f]) columns.push_back(f);
    if (columns.size() * 4 > size_t(width) * 3) return {};
    return torch::from_blob(columns.data(), {int64_t(columns.size())}, torch::kInt64)
        .clone()
        .to(device);
}

StateBatch make_state_batch(const float *rows, int64_t B, int64_t width,
                            const DenseGraph *const *graphs, torch::Device device) {
    StateBatch batch;
    // from_blob wraps the caller's rows; .to() copies only when the device is not the CPU.
    batch.flat =
        torch::from_blob(const_cast<float *>(rows), {B, width}, torch::kFloat32).to(device);
    batch.nonzero_columns = nonzero_columns(rows, B, width, device);
    if (!graphs) return batch;
    // One disjoint union of the B graphs: vertices numbered graph after graph, edges as index
    // tensors, so message passing is a few index_select/index_add_ over the whole batch.
    int64_t N = 0, E = 0;
    for (int64_t b = 0; b < B; ++b) {
        if (graphs[b]->num_vertices == 0)
            throw looptool::Error("the gnn encoder needs states encoded with their graph");
        N += graphs[b]->num_vertices;
        E += static_cast<int64_t>(graphs[b]->edges.size());
    }
    torch::Tensor x = torch::empty({N, kGraphVertexFeatures}, torch::kFloat32);
    torch::Tensor src = torch::empty({E}, torch::kInt64), dst = torch::empty({E}, torch::kInt64);
    torch::Tensor graph_of = torch::empty({N}, torch::kInt64);
    torch::Tensor in_deg = torch::zeros({N, 1}, torch::kFloat32),
                  out_deg = torch::zeros({N, 1}, torch::kFloat32);
    torch::Tensor vertices = torch::empty({B, 1}, torch::kFloat32);
    float *xp = x.data_ptr<float>(), *ip = in_deg.data_ptr<float>(),
          *op = out_deg.data_ptr<float>();
    int64_t *sp = src.data_ptr<int64_t>(), *dp = dst.data_ptr<int64_t>(),
            *gp = graph_of.data_ptr<int64_t>();
    int64_t base = 0, e = 0;
    for (int64_t b = 0; b < B; ++b) {
        const DenseGraph &g = *graphs[b];
        std::copy(g.features.begin(), g.features.end(), xp + base * kGraphVertexFeatures);
        for (auto [s, t] : g.edges) {
            sp[e] = base + s;
            dp[e] = base + t;
            ++ip[base + t];
            ++op[base + s];
            ++e;
        }
        std::fill_n(gp + base, g.num_vertices, b);
        vertices.data_ptr<float>()[b] = static_cast<float>(g.num_vertices);
        base += g.num_vertices;
    }
    batch.x = x.to(device);
    batch.src = src.to(device);
    batch.dst = dst.to(device);
    batch.graph_of = graph_of.to(device);
    batch.in_deg = in_deg.clamp_min_(1).to(device);
    batch.out_deg = out_deg.clamp_min_(1).to(device);
    batch.vertices = vertices.clamp_min_(1).to(device);
    return batch;
}

StateBatch make_state_batch(const std::vector<const RlState *> &states, bool with_graph,
                            torch::Device device) {
    const int64_t B = static_cast<int64_t>(states.size());
    const int64_t F = B ? static_cast<int64_t>(states[0]->flat.size()) : 0;
    torch::Tensor rows = torch::empty({B, F}, torch::kFloat32);
    std::vector<const DenseGraph *> graphs;
    for (int64_t b = 0; b < B; ++b) {
        if (static_cast<int64_t>(states[b]->flat.size()) != F)
            throw looptool::Error(
                "states of a batch differ in size: " + std::to_string(states[b]->flat.size()) +
                " and " + std::to_string(F) + " features");
        std::copy_n(states[b]->flat.data(), F, rows.data_ptr<float>() + b * F);
        graphs.push_back(&states[b]->graph);
    }
    StateBatch batch = make_state_batch(rows.data_ptr<float>(), B, F,
                                        with_graph ? graphs.data() : nullptr, device);
    if (device.is_cpu()) batch.flat = rows;  // own the rows (the wrapper above borrowed them)
    return batch;
}

static void check_width(const StateBatch &batch, int64_t expected) {
    if (batch.flat.size(1) != expected)
        throw looptool::Error("state has " + std::to_string(batch.flat.size(1)) +
                              " features, the network expects " + std::to_string(expected));
}

torch::Tensor QNetImpl::encode_mlp(const StateBatch &batch) {
    check_width(batch, config_.shape.flat_size());
    if (!batch.nonzero_columns.defined()) return mlp_->forward(batch.flat);
    // The first layer on the non-zero columns only (see nonzero_columns()), then the rest.
    auto first = mlp_->ptr<nn::LinearImpl>(0);
    torch::Tensor h =
        torch::linear(batch.flat.index_select(1, batch.nonzero_columns),
                      first->weight.index_select(1, batch.nonzero_columns), first->bias);
    for (auto layer = std::next(mlp_->begin()); layer != mlp_->end(); ++layer)
        h = layer->forward(h);
    return h;
}

// Message passing over the loop tree: each round a vertex combines itself with the mean of its
// parent's and its children's embeddings; the readout is the mean over vertices, the cursor
// loop's embedding and the global features (strides, previous actions, steps left).
torch::Tensor QNetImpl::encode_gnn(const StateBatch &batch) {
    check_width(batch, config_.shape.flat_size());
    if (!batch.x.defined())
        throw looptool::Error("the gnn encoder needs states encoded with their graph");
    const int64_t B = batch.size();
    const torch::Tensor &x = batch.x, &s = batch.src, &t = batch.dst, &gi = batch.graph_of;
    torch::Tensor h = torch::relu(node_in_->forward(x));
    for (size_t r = 0; r < self_.size(); ++r) {
        torch::Tensor from_parent =
            torch::zeros_like(h).index_add_(0, t, h.index_select(0, s)) / batch.in_deg;
        torch::Tensor from_children =
            torch::zeros_like(h).index_add_(0, s, h.index_select(0, t)) / batch.out_deg;
        h = h + torch::relu(self_[r]->forward(h) + down_[r]->forward(from_parent) +
                            up_[r]->forward(from_children));
    }
    const int64_t G = h.size(1);
    torch::Tensor mean = torch::zeros({B, G}, x.options()).index_add_(0, gi, h) / batch.vertices;
    constexpr int kCursorFeature = 8;  // see kGraphVertexFeatures in env/graph_observation.h
    torch::Tensor cursor =
        torch::zeros({B, G}, x.options())
            .index_add_(0, gi,
                        h * x.index({torch::indexing::Slice(), kCursorFeature}).unsqueeze(1));
    torch::Tensor globals = torch::relu(globals_in_->forward(
        batch.flat.narrow(1, config_.shape.loops_size(), config_.shape.globals_size())));
    return torch::relu(readout_->forward(torch::cat({mean, cursor, globals}, 1)));
}

torch::Tensor QNetImpl::forward(const StateBatch &batch) {
    torch::Tensor z = config_.encoder == "mlp" ? encode_mlp(batch) : encode_gnn(batch);
    torch::Tensor a = advantage_->forward(z);
    return value_->forward(z) + a - a.mean(1, /*keepdim=*/true);
}

torch::Tensor QNetImpl::forward(const std::vector<const RlState *> &states) {
    const torch::Device device = value_->parameters().front().device();
    return forward(make_state_batch(states, uses_graph(), device));
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

torch::Tensor mask_tensor(const uint8_t *masks, int64_t B, int64_t A, torch::Device device) {
    // Bytes of 0 or 1 are valid bools: wrap them as such.
    return torch::from_blob(const_cast<uint8_t *>(masks), {B, A}, torch::kBool).to(device);
}

torch::Tensor masked(const torch::Tensor &q, const torch::Tensor &mask) {
    return q.masked_fill(mask.logical_not(), -1e9);
}

std::string qnet_config_json(const QNetConfig &c) {
    nlohmann::json j = {{"encoder", c.encoder},
                        {"hidden", c.hidden},
                        {"gnn_hidden", c.gnn_hidden},
                        {"gnn_rounds", c.gnn_rounds},
                        {"max_loops", c.shape.max_loops},
                        {"num_actions", c.shape.num_actions},
                        {"machine_features", c.shape.machine_features}};
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
        // Absent in a network from before the machine vector (policy_extend.h widens one).
        c.shape.machine_features = j.value("machine_features", 0);
        return c;
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(std::string("bad network description: ") + e.what());
    }
}

void load_weights_checked(QNet &net, torch::serialize::InputArchive &archive) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> want;
    for (const auto &p : net->named_parameters())
        want.emplace_back(p.key(), p.value().sizes().vec());
    for (const auto &b : net->named_buffers()) want.emplace_back(b.key(), b.value().sizes().vec());
    net->load(archive);
    std::map<std::string, torch::Tensor> got;
    for (const auto &p : net->named_parameters()) got[p.key()] = p.value();
    for (const auto &b : net->named_buffers()) got[b.key()] = b.value();
    for (const auto &[key, shape] : want) {
        const torch::Tensor &t = got[key];
        if (t.sizes().vec() != shape)
            throw looptool::Error(fmt::format("tensor {} has shape [{}], the network needs [{}]",
                                              key, fmt::join(t.sizes().vec(), ", "),
                                              fmt::join(shape, ", ")));
        if (t.scalar_type() != torch::kFloat32 || !t.is_contiguous())
            throw looptool::Error(fmt::format("tensor {} is not a contiguous float32 tensor", key));
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
    if (DenseQNet::applies(net)) {
        // One row through the dense path: ~100 us less LibTorch dispatch per action.
        DenseQNet dense(net);
        if (static_cast<int64_t>(s.flat.size()) != dense.width())
            throw looptool::Error("state has " + std::to_string(s.flat.size()) +
                                  " features, the network expects " +
                                  std::to_string(dense.width()));
        const DenseGraph *graph = &s.graph;
        const float *q = dense.forward({{s.flat.data(), 1, net->uses_graph() ? &graph : nullptr}});
        int best = -1;
        for (int a = 0; a < static_cast<int>(dense.num_actions()); ++a)
            if (s.mask[a] && (best < 0 || q[a] > q[best])) best = a;
        return best;
    }
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
    archive.write("checksum", c10::IValue(policy_checksum(net, meta_json)));
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
    QNet net{nullptr};
    std::string json, stored;
    try {
        torch::serialize::InputArchive archive, weights;
        archive.load_from(path);
        c10::IValue meta, checksum;
        archive.read("meta", meta);
        json = meta.toStringRef();
        nlohmann::json j = nlohmann::json::parse(json);
        net = QNet(qnet_config_from_json(j.at("network").dump()));
        archive.read("weights", weights);
        load_weights_checked(net, weights);
        net->eval();
        if (archive.try_read("checksum", checksum)) stored = checksum.toStringRef();
    } catch (const looptool::InternalError &) {
        throw;  // a bug of ours, not a bad file
    } catch (const looptool::Error &e) {
        throw looptool::Error(path + ": not a looptune policy file: " + e.what());
    } catch (const c10::Error &e) {
        throw looptool::Error(path + ": not a looptune policy file (" + torch_error_line(e) + ")");
    } catch (const std::exception &e) {
        const std::string what = e.what();
        throw looptool::Error(path + ": not a looptune policy file (" +
                              what.substr(0, what.find('\n')) + ")");
    }
    if (stored.empty()) {
        // Written before policy files carried a checksum: still loaded, but not silently.
        fmt::print(
            stderr,
            "warning: {}: no checksum (written before checksums were stored); its integrity is "
            "not checked\n",
            path);
    } else if (const std::string computed = policy_checksum(net, json); computed != stored) {
        throw looptool::Error(
            fmt::format("{}: damaged policy file: checksum {} does not match the stored {}", path,
                        computed, stored));
    }
    if (meta_json) *meta_json = json;
    return net;
}

}  // namespace looptune
