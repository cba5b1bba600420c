#include "rl/policy_checksum.h"

#include <fmt/format.h>

#include <boost/crc.hpp>

namespace looptune {

namespace {

void add_tensor(boost::crc_32_type &crc, const std::string &name, const torch::Tensor &t) {
    crc.process_bytes(name.data(), name.size());
    for (int64_t s : t.sizes()) crc.process_bytes(&s, sizeof s);
    const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    crc.process_bytes(c.data_ptr(), c.numel() * c.element_size());
}

}  // namespace

std::string policy_checksum(QNet &net, const std::string &meta_json) {
    boost::crc_32_type crc;
    crc.process_bytes(meta_json.data(), meta_json.size());
    for (const auto &p : net->named_parameters()) add_tensor(crc, p.key(), p.value());
    for (const auto &b : net->named_buffers()) add_tensor(crc, b.key(), b.value());
    return fmt::format("crc32:{:08x}", crc.checksum());
}

}  // namespace looptune
