#include "rl/policy_convert.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "looptool/ir/error.h"
#include "rl/torch_errors.h"

namespace looptune {

namespace {

PolicyTensor to_policy_tensor(const std::string &name, const torch::Tensor &t) {
    const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    PolicyTensor out{name, c.sizes().vec(), {}};
    out.data.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    return out;
}

}  // namespace

PolicyFile policy_file_from_qnet(QNet &net, const std::string &meta_json) {
    PolicyFile file{meta_json, {}};
    for (const auto &p : net->named_parameters())
        file.tensors.push_back(to_policy_tensor(p.key(), p.value()));
    for (const auto &b : net->named_buffers())
        file.tensors.push_back(to_policy_tensor(b.key(), b.value()));
    return file;
}

QNet qnet_from_policy_file(const PolicyFile &file) {
    QNetConfig config;
    try {
        config = qnet_config_from_json(nlohmann::json::parse(file.meta_json).at("network").dump());
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(std::string("bad policy description: ") + e.what());
    }
    QNet net(config);
    torch::NoGradGuard no_grad;
    size_t bound = 0;
    for (auto &p : net->named_parameters()) {
        const PolicyTensor *t = file.find(p.key());
        if (!t) throw looptool::Error("no tensor " + p.key() + " (the network needs it)");
        if (t->shape != p.value().sizes().vec())
            throw looptool::Error(fmt::format("tensor {} has shape [{}], the network needs [{}]",
                                              p.key(), fmt::join(t->shape, ", "),
                                              fmt::join(p.value().sizes().vec(), ", ")));
        p.value().copy_(torch::from_blob(const_cast<float *>(t->data.data()), t->shape));
        ++bound;
    }
    if (bound != file.tensors.size() || !net->named_buffers().is_empty())
        throw looptool::Error("the file's tensors are not those of a " + config.encoder +
                              " network");
    net->eval();
    return net;
}

void convert_policy_file(const std::string &libtorch_path, const std::string &flat_path) {
    std::string meta;
    QNet net = load_policy_file(libtorch_path, &meta);
    one_line_torch_errors([&] { write_policy_file(flat_path, policy_file_from_qnet(net, meta)); });
}

}  // namespace looptune
