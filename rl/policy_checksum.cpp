#include "rl/policy_checksum.h"

#include <fmt/format.h>

#include <boost/crc.hpp>

#include "looptool/ir/error.h"

namespace looptune {

namespace {

void add_tensor(boost::crc_32_type &crc, const std::string &name, const torch::Tensor &t) {
    crc.process_bytes(name.data(), name.size());
    for (int64_t s : t.sizes()) crc.process_bytes(&s, sizeof s);
    const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    crc.process_bytes(c.data_ptr(), c.numel() * c.element_size());
}

void add_net(boost::crc_32_type &crc, QNet &net) {
    for (const auto &p : net->named_parameters()) add_tensor(crc, p.key(), p.value());
    for (const auto &b : net->named_buffers()) add_tensor(crc, b.key(), b.value());
}

// Each parameter's Adam state, or null before its first step (Adam keys it by the tensor).
torch::optim::AdamParamState *adam_state(torch::optim::Adam &optimizer, const torch::Tensor &p) {
    auto &states = optimizer.state();
    auto it = states.find(c10::guts::to_string(p.unsafeGetTensorImpl()));
    return it == states.end() ? nullptr
                              : static_cast<torch::optim::AdamParamState *>(it->second.get());
}

}  // namespace

std::string checkpoint_checksum(QNet &online, QNet &target, torch::optim::Adam &optimizer,
                                const std::string &meta_json) {
    boost::crc_32_type crc;
    crc.process_bytes(meta_json.data(), meta_json.size());
    add_net(crc, online);
    add_net(crc, target);
    for (auto &group : optimizer.param_groups())
        for (const torch::Tensor &p : group.params()) {
            const torch::optim::AdamParamState *s = adam_state(optimizer, p);
            const int64_t step = s ? s->step() : -1;
            crc.process_bytes(&step, sizeof step);
            if (!s) continue;
            add_tensor(crc, "exp_avg", s->exp_avg());
            add_tensor(crc, "exp_avg_sq", s->exp_avg_sq());
            if (s->max_exp_avg_sq().defined()) add_tensor(crc, "max", s->max_exp_avg_sq());
        }
    return fmt::format("crc32:{:08x}", crc.checksum());
}

void check_adam_state(torch::optim::Adam &optimizer) {
    for (auto &group : optimizer.param_groups())
        for (const torch::Tensor &p : group.params()) {
            const torch::optim::AdamParamState *s = adam_state(optimizer, p);
            if (!s) continue;
            for (const torch::Tensor &m : {s->exp_avg(), s->exp_avg_sq()})
                if (!m.defined() || m.sizes() != p.sizes() || m.scalar_type() != p.scalar_type() ||
                    !m.is_contiguous())
                    throw looptool::Error(
                        "the optimizer's moments do not match the network's parameters");
        }
}

std::string policy_checksum(QNet &net, const std::string &meta_json) {
    boost::crc_32_type crc;
    crc.process_bytes(meta_json.data(), meta_json.size());
    add_net(crc, net);
    return fmt::format("crc32:{:08x}", crc.checksum());
}

}  // namespace looptune
