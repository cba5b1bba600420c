#include "policy/policy_extend.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "env/observations.h"
#include "looptool/actions/actions.h"
#include "looptool/ir/error.h"
#include "policy/plain_qnet.h"

namespace looptune {
namespace {

using looptool::ActionSpace;

// For each action of `to`, its index in `from`, or -1 for a new one.
std::vector<int> old_indices(const ActionSpace &from, const ActionSpace &to) {
    for (looptool::Action a : from.actions)
        if (to.index_of(a) < 0)
            throw looptool::Error(fmt::format("action space {} lacks {}'s action {}", to.name,
                                              from.name, looptool::action_name(a)));
    std::vector<int> old;
    for (looptool::Action a : to.actions) old.push_back(from.index_of(a));
    return old;
}

// The advantage layer's rows (or bias entries, `width` 1): an old action's own, a new one's
// the mean of the old ones.
std::vector<float> widen_rows(const std::vector<float> &in, int64_t width,
                              const std::vector<int> &old) {
    const int64_t old_rows = int64_t(in.size()) / width;
    std::vector<float> mean(size_t(width), 0.f);
    for (int64_t r = 0; r < old_rows; ++r)
        for (int64_t i = 0; i < width; ++i) mean[size_t(i)] += in[size_t(r * width + i)];
    for (float &m : mean) m /= float(old_rows);
    std::vector<float> out;
    for (int o : old)
        if (o >= 0)
            out.insert(out.end(), in.begin() + o * width, in.begin() + (o + 1) * width);
        else
            out.insert(out.end(), mean.begin(), mean.end());
    return out;
}

// A layer reading the globals (stride buckets, previous actions [kPrevActions x |A|], steps
// left, machine vector) after `offset` other inputs: new actions' previous-action columns are 0.
std::vector<float> widen_columns(const PolicyTensor &in, int64_t new_cols, int64_t offset,
                                 int old_actions, const std::vector<int> &old) {
    const int64_t rows = in.shape[0], old_cols = in.shape[1];
    const int64_t prev = offset + kStrideBuckets, A = int64_t(old.size());
    std::vector<float> out(size_t(rows * new_cols), 0.f);
    for (int64_t c = 0; c < new_cols; ++c) {
        int64_t from = c;  // the loops, the stride buckets
        if (c >= prev + kPrevActions * A) {
            from = c - kPrevActions * (A - old_actions);  // steps left, the machine vector
        } else if (c >= prev) {
            const int64_t step = (c - prev) / A, j = (c - prev) % A;
            from = old[size_t(j)] < 0 ? -1 : prev + step * old_actions + old[size_t(j)];
        }
        if (from < 0) continue;
        LT_CHECK(from < old_cols, "extend_policy: column within the old layer");
        for (int64_t r = 0; r < rows; ++r)
            out[size_t(r * new_cols + c)] = in.data[size_t(r * old_cols + from)];
    }
    return out;
}

}  // namespace

// The network's tensors as its meta describes them, or a looptool::Error naming the first that
// is missing or shaped otherwise.
void check_tensors(const PolicyFile &policy, const NetworkConfig &net) {
    for (const auto &[name, shape] : network_tensors(net)) {
        const PolicyTensor *t = policy.find(name);
        if (!t) throw looptool::Error("no tensor " + name + " (the network needs it)");
        if (t->shape != shape)
            throw looptool::Error(fmt::format("tensor {} has shape [{}], the network needs [{}]",
                                              name, fmt::join(t->shape, ", "),
                                              fmt::join(shape, ", ")));
    }
}

PolicyFile with_machine_inputs(const PolicyFile &policy) {
    nlohmann::json meta = nlohmann::json::parse(policy.meta_json);
    const NetworkConfig old_net = network_config_from_json(meta.at("network").dump());
    check_tensors(policy, old_net);
    if (old_net.machine_features == kMachineFeatures) return policy;
    NetworkConfig net = old_net;
    net.machine_features = kMachineFeatures;
    PolicyFile out;
    for (const auto &[name, shape] : network_tensors(net)) {
        PolicyTensor n = *policy.find(name);  // present: checked above
        if (n.shape != shape) {
            // The machine inputs close the globals, so the flat state's and the globals' old
            // columns keep their places; the new ones read with weight zero.
            LT_CHECK(name == "mlp.0.weight" || name == "globals_in.weight",
                     "with_machine_inputs: only the first layer grows");
            const int64_t rows = shape[0], cols = shape[1], old_cols = n.shape[1];
            std::vector<float> data(size_t(rows * cols), 0.f);
            for (int64_t r = 0; r < rows; ++r)
                std::copy_n(n.data.begin() + r * old_cols, old_cols, data.begin() + r * cols);
            n.shape = shape;
            n.data = std::move(data);
        }
        out.tensors.push_back(std::move(n));
    }
    meta["network"]["machine_features"] = kMachineFeatures;
    out.meta_json = meta.dump();
    return out;
}

PolicyFile load_current_policy(const std::string &path) {
    const PolicyFile policy = read_policy_file(path);  // its errors name the file
    try {
        return with_machine_inputs(policy);
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(path + ": bad policy description: " + e.what());
    } catch (const looptool::Error &e) {
        throw looptool::Error(path + ": not a looptune policy file: " + e.what());
    }
}

PolicyFile extend_policy(const PolicyFile &policy_in, const std::string &to_space) {
    const PolicyFile policy = with_machine_inputs(policy_in);
    nlohmann::json meta = nlohmann::json::parse(policy.meta_json);
    const ActionSpace from = ActionSpace::preset(meta.at("action_space").get<std::string>());
    const ActionSpace to = ActionSpace::preset(to_space);
    const NetworkConfig old_net = network_config_from_json(meta.at("network").dump());
    if (old_net.num_actions != int(from.size()))
        throw looptool::Error(fmt::format("the network has {} actions, preset {} {}",
                                          old_net.num_actions, from.name, from.size()));
    check_tensors(policy, old_net);
    if (from.name == to.name) return policy;
    const std::vector<int> old = old_indices(from, to);
    NetworkConfig net = old_net;
    net.num_actions = int(to.size());
    PolicyFile out;
    for (const auto &[name, shape] : network_tensors(net)) {
        const PolicyTensor *t = policy.find(name);  // present: checked above
        PolicyTensor n{name, shape, {}};
        if (t->shape == shape)
            n.data = t->data;
        else if (name == "advantage.2.weight")
            n.data = widen_rows(t->data, shape[1], old);
        else if (name == "advantage.2.bias")
            n.data = widen_rows(t->data, 1, old);
        else if (name == "mlp.0.weight" || name == "globals_in.weight")
            n.data = widen_columns(
                *t, shape[1], name == "mlp.0.weight" ? net.flat_size() - net.globals_size() : 0,
                old_net.num_actions, old);
        else
            throw looptool::Error(
                fmt::format("tensor {}: shape does not follow the actions", name));
        out.tensors.push_back(std::move(n));
    }
    meta["action_space"] = to.name;
    meta["network"]["num_actions"] = net.num_actions;
    meta["provenance"]["extended_from"] = from.name;
    out.meta_json = meta.dump();
    return out;
}

void extend_policy_file(const std::string &in, const std::string &to_space,
                        const std::string &out) {
    const PolicyFile policy = read_policy_file(in);  // its errors name the file
    PolicyFile wide;
    try {
        wide = extend_policy(policy, to_space);
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(in + ": bad policy description: " + e.what());
    } catch (const looptool::Error &e) {
        throw looptool::Error(in + ": cannot widen it to " + to_space + ": " + e.what());
    }
    write_policy_file(out, wide);
}

}  // namespace looptune
