#include "rl/learner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "policy/policy_extend.h"
#include "rl/episode_starts.h"
#include "rl/fused_adam.h"
#include "rl/policy_checksum.h"
#include "rl/policy_convert.h"
#include "rl/torch_errors.h"
#include "search/trace.h"
#include "util/stats.h"

namespace looptune {

torch::Device pick_device(const std::string &name) {
    if (name == "cpu") return torch::kCPU;
    if (name == "cuda") {
        if (!torch::cuda::is_available())
            throw looptool::Error("--device cuda: this LibTorch has no CUDA device");
        return torch::kCUDA;
    }
    if (name != "auto") throw looptool::Error("unknown device '" + name + "' (auto, cpu or cuda)");
    return torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
}

Learner::Learner(const TrainConfig &config, const QNetConfig &net_config)
    : config_(config),
      net_config_(net_config),
      device_(pick_device(config.device)),
      demo_rng_(config.seed + 17) {
    torch::manual_seed(config.seed);
    online = QNet(net_config);
    target = QNet(net_config);
    online->to(device_);
    target->to(device_);
    copy_weights(target, online);
    target->eval();
    optimizer_ = std::make_unique<torch::optim::Adam>(online->parameters(),
                                                      torch::optim::AdamOptions(config.lr));
    if (!config.autograd_learner && DenseQNet::applies(online)) {
        dense_online_ = std::make_unique<DenseQNet>(online);
        dense_target_ = std::make_unique<DenseQNet>(target);
    }
}

static std::vector<const RlState *> states_of(const std::vector<Transition> &ts, bool next) {
    std::vector<const RlState *> out;
    for (const Transition &t : ts) out.push_back(next ? &t.next : &t.state);
    return out;
}

/// Tensors over a ReplaySample's columns (wrapped, not copied, on the CPU).
struct LearnerBatch {
    StateBatch states, next;
    torch::Tensor next_mask, actions, rewards, discounts, weights;
    LearnerBatch(const ReplaySample &s, bool graph, torch::Device device) {
        const int64_t B = s.size;
        std::vector<const DenseGraph *> g, gn;
        if (graph) {
            for (int64_t b = 0; b < B; ++b) {
                g.push_back(&s.graphs[b]);
                gn.push_back(&s.next_graphs[b]);
            }
        }
        states =
            make_state_batch(s.states.data(), B, s.flat_width, graph ? g.data() : nullptr, device);
        next = make_state_batch(s.next_states.data(), B, s.flat_width, graph ? gn.data() : nullptr,
                                device);
        next_mask = mask_tensor(s.next_masks.data(), B, s.num_actions, device);
        auto wrap = [&](const auto *p, torch::ScalarType type) {
            return torch::from_blob(const_cast<void *>(static_cast<const void *>(p)), {B}, type)
                .to(device);
        };
        actions = wrap(s.actions.data(), torch::kInt64).unsqueeze(1);
        rewards = wrap(s.rewards.data(), torch::kFloat32);
        discounts = wrap(s.discounts.data(), torch::kFloat32);
        weights = wrap(s.weights.data(), torch::kFloat32);
    }
};

float Learner::update(const ReplaySample &sample, std::vector<float> *priorities,
                      const std::vector<Demo> *demos) {
    // DQfD's large-margin loss joins the update on half a batch of demonstrations.
    int64_t D = 0;
    if (demos && !demos->empty()) {
        D = std::max<int64_t>(1, sample.size / 2);
        pick_demonstrations(*demos, D);
    }
    const float loss =
        dense() ? update_dense(sample, priorities, D) : update_autograd(sample, priorities, D);
    clip_and_adam_step(*optimizer_, config_.grad_clip);
    ++updates;
    if (updates % config_.target_update == 0) sync_target();
    return loss;
}

float Learner::update_autograd(const ReplaySample &sample, std::vector<float> *priorities,
                               int64_t D) {
    const int64_t B = sample.size;
    const bool graph = online->uses_graph();
    const LearnerBatch batch(sample, graph, device_);
    torch::Tensor target_q;
    {
        // Double Q: the online network picks the next action among the legal ones, the target
        // network values it.
        torch::NoGradGuard no_grad;
        torch::Tensor best = masked(online->forward(batch.next), batch.next_mask).argmax(1, true);
        torch::Tensor q_next = target->forward(batch.next).gather(1, best).squeeze(1);
        target_q = batch.rewards + batch.discounts * q_next;
    }
    torch::Tensor q = online->forward(batch.states).gather(1, batch.actions).squeeze(1);
    torch::Tensor td = q - target_q;
    torch::Tensor loss =
        (batch.weights * torch::smooth_l1_loss(q, target_q, torch::Reduction::None)).mean();

    if (D > 0) {
        // DQfD's large-margin loss: the demonstrated action must beat every other legal one by
        // a margin, which keeps Q-values meaningful (unlike a cross-entropy on them).
        const int64_t F = sample.flat_width, A = sample.num_actions;
        torch::Tensor dq = online->forward(make_state_batch(
            demo_rows_.data(), D, F, graph ? demo_row_graphs_.data() : nullptr, device_));
        torch::Tensor act =
            torch::from_blob(demo_row_actions_.data(), {D, 1}, torch::kInt64).to(device_);
        torch::Tensor margin = torch::full_like(dq, config_.demo_margin).scatter_(1, act, 0.0);
        torch::Tensor upper =
            masked(dq + margin, mask_tensor(demo_row_masks_.data(), D, A, device_)).amax(1);
        loss = loss + (upper - dq.gather(1, act).squeeze(1)).mean();
    }

    zero_grads(*optimizer_);
    loss.backward();
    if (priorities) {
        torch::Tensor p = (td.detach().abs() + 1e-3).to(torch::kCPU).contiguous();
        priorities->assign(p.data_ptr<float>(), p.data_ptr<float>() + B);
    }
    return loss.item<float>();
}

// The same loss and gradients as update_autograd, written out (either encoder): one forward of the
// online network over the states, the demonstrations and the next states (one GEMM per layer), one
// of the target network over the next states, dL/dQ by hand, and DenseQNet::backward over the rows
// that carry a gradient.
float Learner::update_dense(const ReplaySample &s, std::vector<float> *priorities, int64_t D) {
    const int64_t B = s.size, A = s.num_actions;
    const bool graph = online->uses_graph();
    graph_ptrs_.clear();
    if (graph) {  // the states' graphs, then the demonstrations', then the next states'
        for (const DenseGraph &g : s.graphs) graph_ptrs_.push_back(&g);
        graph_ptrs_.insert(graph_ptrs_.end(), demo_row_graphs_.begin(),
                           demo_row_graphs_.begin() + D);
        for (const DenseGraph &g : s.next_graphs) graph_ptrs_.push_back(&g);
    }
    auto graphs_at = [&](int64_t i) { return graph ? graph_ptrs_.data() + i : nullptr; };
    const float *q = dense_online_->forward({{s.states.data(), B, graphs_at(0)},
                                             {demo_rows_.data(), D, graphs_at(B)},
                                             {s.next_states.data(), B, graphs_at(B + D)}});
    const float *qt = dense_target_->forward({{s.next_states.data(), B, graphs_at(B + D)}});
    auto legal_argmax = [A](const float *row, const uint8_t *mask, const float *add) {
        // As masked(...).argmax(1): illegal actions count as -1e9, the first maximum wins.
        int64_t best = 0;
        float best_v = -std::numeric_limits<float>::infinity();
        for (int64_t a = 0; a < A; ++a) {
            const float v = mask[a] ? row[a] + (add ? add[a] : 0.f) : -1e9f;
            if (v > best_v) best_v = v, best = a;
        }
        return std::pair{best, best_v};
    };
    dq_.assign((B + D) * A, 0.f);
    td_.resize(B);
    double loss = 0;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t best = legal_argmax(q + (B + D + b) * A, &s.next_masks[b * A], nullptr).first;
        const float target_q = s.rewards[b] + s.discounts[b] * qt[b * A + best];
        const int64_t a = s.actions[b];
        const float td = q[b * A + a] - target_q, abs_td = std::abs(td);
        td_[b] = td;
        // Huber (smooth L1 with beta 1), weighted by the importance weights, mean over B.
        loss += s.weights[b] * (abs_td < 1 ? 0.5 * td * td : abs_td - 0.5);
        dq_[b * A + a] = s.weights[b] * std::clamp(td, -1.f, 1.f) / static_cast<float>(B);
    }
    loss /= static_cast<double>(B);
    std::vector<float> &margin = margin_;
    margin.assign(A, static_cast<float>(config_.demo_margin));
    for (int64_t i = 0; i < D; ++i) {
        const float *row = q + (B + i) * A;
        const int64_t act = demo_row_actions_[i];
        margin[act] = 0;
        const auto [best, upper] = legal_argmax(row, &demo_row_masks_[i * A], margin.data());
        margin[act] = static_cast<float>(config_.demo_margin);
        loss += (upper - row[act]) / static_cast<double>(D);
        dq_[(B + i) * A + best] += 1.f / static_cast<float>(D);
        dq_[(B + i) * A + act] -= 1.f / static_cast<float>(D);
    }
    dense_online_->backward(dq_.data(), B + D);
    if (priorities) {
        priorities->resize(B);
        for (int64_t b = 0; b < B; ++b) (*priorities)[b] = std::abs(td_[b]) + 1e-3f;
    }
    return static_cast<float>(loss);
}

float Learner::replay_step(PrioritizedReplay &replay, int64_t env_steps,
                           const std::vector<Demo> *demos, std::mutex *update_lock) {
    const double beta = config_.per_beta +
                        (1 - config_.per_beta) * std::min(1.0, double(env_steps) / config_.steps);
    {
        TrainProfile::Scope timer(profile, TrainProfile::Phase::ReplaySample);
        replay.sample(config_.batch, beta, sample_);
    }
    if (sample_.size == 0) return 0;  // nothing stored yet (--learning-starts 0): no update
    if (demos && demos->empty()) demos = nullptr;
    float loss;
    TrainProfile::Scope timer(profile, TrainProfile::Phase::Update);
    if (update_lock) {
        std::lock_guard<std::mutex> g(*update_lock);
        loss = update(sample_, &priorities_, demos);
    } else {
        loss = update(sample_, &priorities_, demos);
    }
    replay.update_priorities(sample_.indices, priorities_);
    return loss;
}

void Learner::sync_target() { copy_weights(target, online); }

std::vector<float> Learner::td_errors(QNet &net, const std::vector<Transition> &ts, double) {
    torch::NoGradGuard no_grad;
    torch::Device device = net->parameters().front().device();
    const bool graph = net->uses_graph();
    const int64_t B = static_cast<int64_t>(ts.size());
    auto next = states_of(ts, true);
    torch::Tensor qn =
        masked(net->forward(make_state_batch(next, graph, device)), mask_tensor(next, device))
            .amax(1);
    std::vector<int64_t> a;
    std::vector<float> r, d;
    for (const Transition &t : ts) {
        a.push_back(t.action);
        r.push_back(t.reward);
        d.push_back(t.discount);
    }
    torch::Tensor actions = torch::from_blob(a.data(), {B, 1}, torch::kInt64).to(device);
    torch::Tensor rewards = torch::from_blob(r.data(), {B}, torch::kFloat32).to(device);
    torch::Tensor discounts = torch::from_blob(d.data(), {B}, torch::kFloat32).to(device);
    torch::Tensor q = net->forward(make_state_batch(states_of(ts, false), graph, device))
                          .gather(1, actions)
                          .squeeze(1);
    torch::Tensor p = ((q - (rewards + discounts * qn)).abs() + 1e-3).to(torch::kCPU).contiguous();
    return std::vector<float>(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
}

static void save_archive_atomically(torch::serialize::OutputArchive &archive,
                                    const std::string &path) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    archive.save_to(tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw looptool::Error("cannot write " + path);
    }
}

void Learner::save_checkpoint(const std::string &path, const nlohmann::json &counters) {
    TrainProfile::Scope timer(profile, TrainProfile::Phase::Checkpoint);
    torch::serialize::OutputArchive archive, on, tg, opt;
    online->save(on);
    target->save(tg);
    optimizer_->save(opt);
    archive.write("online", on);
    archive.write("target", tg);
    archive.write("optimizer", opt);
    nlohmann::json meta = counters;
    meta["updates"] = updates;
    meta["network"] = nlohmann::json::parse(qnet_config_json(net_config_));
    archive.write("meta", c10::IValue(meta.dump()));
    archive.write("checksum",
                  c10::IValue(checkpoint_checksum(online, target, *optimizer_, meta.dump())));
    save_archive_atomically(archive, path);
}

bool Learner::load_checkpoint(const std::string &path, nlohmann::json *counters) {
    if (!std::filesystem::exists(path)) return false;
    try {
        torch::serialize::InputArchive archive, on, tg, opt;
        archive.load_from(path, device_);
        c10::IValue meta;
        archive.read("meta", meta);
        nlohmann::json j = nlohmann::json::parse(meta.toStringRef());
        if (j.at("network").dump() != nlohmann::json::parse(qnet_config_json(net_config_)).dump())
            throw looptool::Error("its network " + j.at("network").dump() +
                                  " differs from the requested " + qnet_config_json(net_config_));
        archive.read("online", on);
        archive.read("target", tg);
        archive.read("optimizer", opt);
        load_weights_checked(online, on);
        load_weights_checked(target, tg);
        optimizer_->load(opt);
        check_adam_state(*optimizer_);
        c10::IValue stored;
        if (!archive.try_read("checksum", stored))
            looptool::warn(
                path +
                ": no checksum (written before checkpoints had one); its integrity is not checked");
        else if (const std::string computed =
                     checkpoint_checksum(online, target, *optimizer_, meta.toStringRef());
                 computed != stored.toStringRef())
            throw looptool::Error(
                fmt::format("damaged checkpoint: checksum {} does not match the stored {}",
                            computed, stored.toStringRef()));
        if (dense()) {  // bind to the loaded tensors, whatever load() did to the old ones
            dense_online_ = std::make_unique<DenseQNet>(online);
            dense_target_ = std::make_unique<DenseQNet>(target);
        }
        updates = j.value("updates", int64_t{0});
        *counters = j;
        return true;
    } catch (const looptool::InternalError &) {
        throw;  // a bug of ours, not a bad checkpoint
    } catch (const looptool::Error &e) {
        throw looptool::Error("cannot resume from " + path + ": " + e.what());
    } catch (const c10::Error &e) {  // one line, not LibTorch's backtrace
        throw looptool::Error("cannot resume from " + path + ": not a readable checkpoint (" +
                              torch_error_line(e) + ")");
    } catch (const std::exception &e) {
        const std::string what = e.what();
        throw looptool::Error("cannot resume from " + path + ": " +
                              what.substr(0, std::min<size_t>(what.find('\n'), 200)));
    }
}

void Learner::save_policy(const std::string &path, const nlohmann::json &provenance) {
    TrainProfile::Scope timer(profile, TrainProfile::Phase::Checkpoint);
    nlohmann::json meta = {{"action_space", config_.action_space},
                           {"max_steps", config_.max_steps},
                           {"network", nlohmann::json::parse(qnet_config_json(net_config_))},
                           {"provenance", provenance}};
    write_policy_file(path, policy_file_from_qnet(online, meta.dump()));
}

EnvConfig train_env_config(const TrainConfig &config) {
    EnvConfig e;
    e.action_space = config.action_space;
    e.max_steps = config.max_steps;
    e.max_loops = config.max_loops;
    e.threads = config.threads;
    e.store_path = config.store_path.empty() ? config.out_dir + "/store.sqlite" : config.store_path;
    return e;
}

int epsilon_greedy(QNet &net, const RlState &s, double eps, std::mt19937_64 &rng) {
    std::uniform_real_distribution<double> u(0, 1);
    if (u(rng) < eps) {
        std::vector<int> legal;
        for (size_t i = 0; i < s.mask.size(); ++i)
            if (s.mask[i]) legal.push_back(static_cast<int>(i));
        if (legal.empty()) return -1;
        return legal[std::uniform_int_distribution<size_t>(0, legal.size() - 1)(rng)];
    }
    return greedy_action(net, s);
}

ActedStep act_epsilon_greedy(QNet &net, Environment &env, bool with_graph, double eps,
                             std::mt19937_64 &rng, NStepBuilder &nstep,
                             std::vector<Transition> *completed, RlState &current,
                             TrainProfile *profile) {
    using Phase = TrainProfile::Phase;
    if (current.flat.empty()) {
        TrainProfile::Scope timer(profile, Phase::Encode);
        current = encode_state(env, with_graph);
    }
    int a;
    {
        TrainProfile::Scope timer(profile, Phase::Act);
        a = epsilon_greedy(net, current, eps, rng);
    }
    if (a < 0) return {};
    StepResult r;
    {
        TrainProfile::Scope timer(profile, Phase::EnvStep);
        r = env.step_index(a);
    }
    RlState next;
    {
        TrainProfile::Scope timer(profile, Phase::Encode);
        next = encode_state(env, with_graph);
    }
    const bool done = r.done || !any_legal(next);
    for (Transition &t : nstep.push(current, a, static_cast<float>(r.reward), next, done))
        completed->push_back(std::move(t));
    current = std::move(next);  // the next step starts from it: encoded once
    return {true, done, r.reward};
}

void RunningMean::push(double v) {
    if (values_.size() < n_) {
        values_.push_back(v);
    } else {
        values_[next_] = v;
        next_ = (next_ + 1) % n_;
    }
}

double RunningMean::mean() const {
    if (values_.empty()) return 0;
    double s = 0;
    for (double v : values_) s += v;
    return s / values_.size();
}

}  // namespace looptune

namespace looptune {

void Learner::start_from(const std::string &path) {
    QNet from = qnet_from_policy_file(load_current_policy(path));
    auto theirs = from->named_parameters();
    for (const auto &p : online->named_parameters()) {
        const torch::Tensor *t = theirs.find(p.key());
        if (!t || t->sizes() != p.value().sizes())
            throw looptool::Error(
                fmt::format("{}: its network does not match this run's ({}: [{}] here, {} there)",
                            path, p.key(), fmt::join(p.value().sizes().vec(), ", "),
                            t ? fmt::format("[{}]", fmt::join(t->sizes().vec(), ", ")) : "none"));
    }
    from->to(device_);
    copy_weights(online, from);
    copy_weights(target, online);
}

QNetConfig net_config_for(const TrainConfig &config, const Environment &env) {
    QNetConfig n;
    n.encoder = name(config.encoder);
    n.hidden = config.hidden;
    n.gnn_hidden = config.gnn_hidden;
    n.gnn_rounds = config.gnn_rounds;
    n.shape = rl_shape(env);
    return n;
}

}  // namespace looptune
