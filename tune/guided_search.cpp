#include "tune/guided_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "looptool/ir/error.h"
#include "looptool/measure/traffic.h"
#include "search/tile_schedules.h"
#include "tune/guided_finals.h"
#include "tune/ranked_rollout.h"
#include "util/stats.h"

namespace looptune {

using looptool::Action;
using looptool::Program;

namespace {

using Node = SearchNode;

class Search {
public:
    Search(const Policy &policy, Environment &env, const GuidedConfig &config, int limit,
           double flops)
        : policy_(policy), env_(env), config_(config), limit_(limit), flops_(flops) {}

    /// No step starts that would, at the average cost of a measured state so far, end after
    /// 95% of the budget: the budget bounds the search's end, and the 5% are for what those
    /// estimates miss (docs/decisions.md).
    bool out_of_time() const {
        const double t = elapsed();
        return t + (nodes_.empty() ? 0.0 : t / double(nodes_.size())) + finals_reserve() >=
               0.95 * config_.budget_s;
    }

    /// Time kept for re-measuring the finalists (and the greedy rollout's best) with the
    /// configured protocol: per kernel its warm-ups, then at least its minimum time and runs of
    /// the best kernel so far.
    double finals_reserve() const {
        if (!config_.bounded_measurements || best_gflops_ <= 0) return 0;
        // A kernel measured on prefixes: about the finalists' prefix (rounded up to whole
        // iterations, or two prefixes).
        const double prefix = final_prefix_flops();
        const double measured = prefix > 0 && flops_ > 2 * prefix ? 1.5 * prefix : flops_;
        const double call_s = measured / (best_gflops_ * 1e9);
        const looptool::MeasureOptions m =
            fewer_long_calls(env_.config().measure, call_s, kFinalCalls);
        // The finalists, the greedy rollout's best, the best seed, the best that does not
        // depend on the shared cache; above one thread the counterparts across `parallel`
        // and the two best's rematch (rematch_top_two()).
        const int kernels =
            kFinalists + 3 +
            (env_.config().threads > 1 ? kThreadCounterparts + 1 + 2 * (kJudgeRounds - 1) : 0);
        return kernels *
               (double(m.warmup) * call_s + std::max(m.min_time_s, double(m.min_runs) * call_s));
    }

    /// The finalists' prefixes, FLOPs (0: whole kernels).
    double final_prefix_flops() const { return kFinalPrefix * config_.prefix_gflops * 1e9; }

    /// Seconds a call of the best kernel so far takes.
    double best_call_s() const { return flops_ / (best_gflops_ * 1e9); }

    /// The configured protocol, with fewer calls when the best kernel's call is long
    /// (fewer_long_calls()).
    looptool::MeasureOptions finals_options() const {
        return fewer_long_calls(env_.config().measure, best_call_s(), kFinalCalls);
    }

    /// The seed measured fastest by the search, if any seed was measured.
    std::optional<size_t> best_seed_node() const {
        const auto best = std::max_element(
            seed_nodes_.begin(), seed_nodes_.end(),
            [&](size_t a, size_t b) { return nodes_[a].gflops < nodes_[b].gflops; });
        return best == seed_nodes_.end() ? std::nullopt : std::optional<size_t>(*best);
    }

    /// The finalists measured again with the configured protocol (a bounded measurement of
    /// 3-4 calls can rank a kernel above one the full protocol puts 5-20% ahead). A finalist the
    /// search's bound cut short at under half the best cannot win and keeps its figure (0 in
    /// the returned list); the start is measured again for its figure to be reported, such a
    /// start within a share of the budget (measure_start()).
    std::vector<double> measure_finals(const Finals &f, GuidedResult &r) {
        const double top = nodes_[f.nodes.front()].gflops;
        // Which were cut short: the environment forgets it when its protocol is reset.
        std::vector<bool> hopeless(f.nodes.size());
        for (size_t k = 0; k < f.nodes.size(); ++k) {
            const Node &n = nodes_[f.nodes[k]];
            hopeless[k] = env_.cut_short(n.program) && 2 * n.gflops < top;
        }
        env_.reset_measure_options();
        // (With fewer calls than configured the figures are not the store's to keep.)
        const looptool::MeasureOptions fin = finals_options();
        if (fin.min_runs != env_.measure_options().min_runs) env_.set_measure_options(fin);
        env_.set_prefix_flops(final_prefix_flops(), 0.5);
        const std::string greedy_key = looptool::schedule_key(r.greedy.best),
                          start_key = looptool::schedule_key(nodes_[start_node_].program);
        std::vector<double> gflops(f.nodes.size());
        for (size_t k = 0; k < f.nodes.size(); ++k) {
            Node &n = nodes_[f.nodes[k]];
            if (f.keys[k] == start_key) {
                n.gflops = nodes_[start_node_].gflops = measure_start(n.program, fin, hopeless[k]);
                // Cut short again: an upper bound, which a long call of the best may not exceed.
                if (hopeless[k] && env_.cut_short(n.program)) continue;
            } else if (!hopeless[k]) {
                n.gflops = env_.measure_again(n.program);
            } else {
                continue;
            }
            if (f.keys[k] == greedy_key) r.greedy.best_gflops = n.gflops;
            gflops[k] = n.gflops;
        }
        return gflops;
    }

    /// The start measured again with start_options() (its calls may be far longer than the
    /// finalists').
    double measure_start(const Program &start, const looptool::MeasureOptions &fin, bool hopeless) {
        const double g = nodes_[start_node_].gflops;
        env_.set_measure_options(start_options(
            env_.config().measure, g > 0 ? flops_ / (g * 1e9) : 0, hopeless, config_.budget_s));
        const double measured = env_.measure_again(start);
        env_.set_measure_options(fin);
        return measured;
    }

    /// The best seed and the chosen kernel in kJudgeRounds alternating rounds (the finals'
    /// figures being the first): a difference smaller than the rounds' spread is not what the
    /// policy added.
    void judge_against_seed(const Finals &f, size_t win, GuidedResult &r) {
        // The fastest seed among the finalists, as measured again there (a seed left out of
        // the finals keeps a bounded figure that may read faster).
        std::optional<size_t> s;
        for (size_t i : seed_nodes_)
            if (f.find(nodes_, i) >= 0 && (!s || nodes_[i].gflops > nodes_[*s].gflops)) s = i;
        if (!s) return;
        r.best_seed = nodes_[*s].origin;
        r.best_seed_actions = nodes_[*s].path;
        r.same_as_seed = looptool::schedule_key(nodes_[*s].program) ==
                         looptool::schedule_key(nodes_[win].program);
        r.best_seed_gflops = r.same_as_seed ? nodes_[win].gflops : nodes_[*s].gflops;
        if (r.same_as_seed) return;
        r.seed_rounds = {nodes_[*s].gflops};
        r.best_rounds = {nodes_[win].gflops};
        for (int round = 1; round < kJudgeRounds; ++round) {
            r.seed_rounds.push_back(env_.measure_again(nodes_[*s].program));
            r.best_rounds.push_back(env_.measure_again(nodes_[win].program));
        }
    }

    /// Above one thread, the two fastest finalists but the start measured again in kJudgeRounds
    /// alternating rounds (the finals' figures the first), each one's figure then the median of
    /// its rounds: a kernel on every core is slowed by another process on any of them, and one
    /// measurement of 10 ms can fall in such a burst where its rival's did not.
    void rematch_top_two(const Finals &f, std::vector<double> &gflops) {
        if (env_.config().threads < 2) return;
        const long start = f.find(nodes_, start_node_);
        std::vector<size_t> top;
        for (size_t k = 0; k < gflops.size(); ++k)
            if (gflops[k] > 0 && long(k) != start) top.push_back(k);
        if (top.size() < 2) return;
        std::partial_sort(top.begin(), top.begin() + 2, top.end(),
                          [&](size_t a, size_t b) { return gflops[a] > gflops[b]; });
        std::vector<double> rounds[2] = {{gflops[top[0]]}, {gflops[top[1]]}};
        for (int round = 1; round < kJudgeRounds; ++round)
            for (int i : {1, 0})
                rounds[i].push_back(env_.measure_again(nodes_[f.nodes[top[size_t(i)]]].program));
        for (int i : {0, 1})
            gflops[top[size_t(i)]] = nodes_[f.nodes[top[size_t(i)]]].gflops = median(rounds[i]);
    }

    /// The finalists measured again; the fastest (but for the robust margin, and never below
    /// the start); the best seed judged beside it. Returns the index of the winner.
    size_t final_choice(GuidedResult &r) {
        Finals f = pick_finals(nodes_, kFinalists, best_seed_node(), r.greedy, start_node_);
        for (SearchNode &c :
             thread_counterparts(nodes_, f, nodes_[start_node_].program, env_.config().threads))
            f.take(nodes_, add(c.program, std::move(c.path), 0, config_.branches, c.origin));
        std::vector<double> gflops = measure_finals(f, r);
        rematch_top_two(f, gflops);
        std::vector<bool> fragile(f.nodes.size());
        for (size_t k = 0; k < f.nodes.size(); ++k) {
            const Node &n = nodes_[f.nodes[k]];
            fragile[k] = depends_on_shared_cache(n.program);
            r.finalists.push_back({n.origin, n.path, gflops[k]});
        }
        const size_t fastest =
            size_t(std::max_element(gflops.begin(), gflops.end()) - gflops.begin());
        const size_t chosen = choose_final(gflops, fragile, size_t(f.find(nodes_, start_node_)),
                                           config_.robust_margin);
        if (chosen != fastest) r.passed_over_gflops = gflops[fastest];
        r.base_gflops = nodes_[start_node_].gflops;
        r.base_cut_short = env_.cut_short(nodes_[start_node_].program);
        judge_against_seed(f, f.nodes[chosen], r);
        return f.nodes[chosen];
    }

    /// Before each measurement: the search's protocol (bounded_options()) from the best so far.
    void bound_next_measurement() {
        if (!config_.bounded_measurements) return;
        env_.set_measure_options(bounded_options(env_.config().measure, flops_, best_gflops_));
        env_.set_prefix_flops(config_.prefix_gflops * 1e9);
    }
    double elapsed() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    }

    /// Records a measured state once (by schedule and cursor); returns its node's index.
    size_t add(const Program &p, std::vector<Action> path, double gflops, int next_branch,
               const std::string &origin) {
        const std::string key = looptool::schedule_key(p) + "@" + std::to_string(p.cursor);
        if (auto it = index_.find(key); it != index_.end()) return it->second;
        best_gflops_ = std::max(best_gflops_, gflops);
        index_.emplace(key, nodes_.size());
        nodes_.push_back({p, std::move(path), gflops, next_branch, origin});
        return nodes_.size() - 1;
    }

    /// Measures a seed from the naive nest `start` (tune_seeds() checked that it applies).
    void add_seed(const Program &start, const TuneSeed &s) {
        Program t = start;
        for (Action a : s.actions) t = looptool::apply(t, a);
        bound_next_measurement();
        seed_nodes_.push_back(add(t, s.actions, env_.evaluate(t), 0, s.name));
    }

    /// The best measured state that still has a branch to try and room for another action.
    Node *next_to_expand() {
        Node *pick = nullptr;
        for (Node &n : nodes_)
            if (n.next_branch < config_.branches && int(n.path.size()) < limit_ &&
                (!pick || n.gflops > pick->gflops))
                pick = &n;
        return pick;
    }

    /// From `from`: its branch-th action by Q-value (branch 0: the greedy one), then the policy
    /// greedily, for at most the policy's episode and the step limit, while time remains.
    void rollout(size_t from_index, int branch) {
        ++rollouts_;
        const Node from = nodes_[from_index];  // a copy: add() may reallocate nodes_
        const std::string origin =
            from.origin.ends_with(" + policy") ? from.origin : from.origin + " + policy";
        if (config_.rank) return ranked_rollout(from, branch, origin);
        bound_next_measurement();
        env_.reset(from.program);  // a fresh episode of the policy's length from this state
        std::vector<float> q = policy_.q_values(env_);
        std::vector<int> order(q.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return q[a] > q[b]; });
        if (branch >= int(order.size()) || std::isinf(q[size_t(order[size_t(branch)])])) return;
        std::vector<Action> path = from.path;
        int a = order[size_t(branch)];
        size_t last = nodes_.size();
        while (a >= 0 && int(path.size()) < limit_ && !out_of_time()) {
            bound_next_measurement();
            env_.step_index(a);
            path.push_back(env_.action_space().actions[size_t(a)]);
            last = add(env_.program(), path, env_.gflops(), 1, origin);
            a = policy_.act(env_);
        }
        // Stopped by the policy's episode length, not by the policy: continuing is a branch.
        if (last < nodes_.size() && a < 0 && env_.steps_taken() >= env_.config().max_steps)
            nodes_[last].next_branch = 0;
    }

    /// rollout() with the cost model: unmeasured, then its best-scored state measured.
    void ranked_rollout(const Node &from, int branch, const std::string &origin) {
        const std::vector<ScoredState> states = scored_rollout(
            policy_, shadow(), from.program, branch, limit_ - int(from.path.size()), *config_.rank);
        const auto top = std::max_element(
            states.begin(), states.end(),
            [](const ScoredState &a, const ScoredState &b) { return a.score < b.score; });
        const double before = best_gflops_;
        if (top != states.end()) {
            std::vector<Action> path = from.path;
            path.insert(path.end(), top->actions.begin(), top->actions.end());
            bound_next_measurement();
            add(top->program, std::move(path), env_.evaluate(top->program), 0, origin);
        }
        stale_ = best_gflops_ > before ? 0 : stale_ + 1;
    }

    /// tune_with_policy() (the policy's greedy episode from `start`), each measurement within
    /// the search's bound; the start becomes the node "naive".
    PolicyTuneResult greedy_rollout(const Program &start) {
        RolloutHooks hooks;
        hooks.before_measurement = [this] { bound_next_measurement(); };
        hooks.after_measurement = [&](int step, double gflops) {
            if (step == 0)
                start_node_ = add(start, {}, gflops, 1, "naive");
            else
                best_gflops_ = std::max(best_gflops_, gflops);
        };
        if (!config_.rank) return tune_with_policy(policy_, env_, start, hooks);
        return ranked_greedy_rollout(policy_, env_, shadow(), start, *config_.rank, hooks);
    }

    /// `win`, or when its actions do not apply to `whole` (an unroll of the batch loop, longer
    /// there), the best measured state whose actions do (the naive nest's always do); `out`
    /// gets its actions applied to `whole`.
    const Node &transfer(const Node &win, const Program &whole, Program &out) const {
        std::vector<const Node *> order;
        for (const Node &n : nodes_) order.push_back(&n);
        std::stable_sort(order.begin(), order.end(),
                         [](const Node *a, const Node *b) { return a->gflops > b->gflops; });
        order.insert(order.begin(), &win);
        for (const Node *n : order) {
            Program p = whole;
            bool ok = true;
            for (size_t i = 0; ok && i < n->path.size(); ++i) {
                ok = looptool::is_legal(p, n->path[i]);
                if (ok) p = looptool::apply(p, n->path[i]);
            }
            if (ok) {
                out = std::move(p);
                return *n;
            }
        }
        throw looptool::Error("guided search: no state applies to the whole computation");
    }

    /// The search from `start`; with `whole`, `start` is a part of it (conv_batch_slice(),
    /// conv_row_band()) and the result is the best state's actions applied to `whole`;
    /// `row_band`: `start` is a band of rows (tune_seeds()' row_band).
    GuidedResult run(const Program &start, const Program *whole = nullptr, bool row_band = false) {
        GuidedResult r;
        const auto counters0 = env_.counters();
        const int64_t prefix0 = env_.prefix_measurements();
        r.max_steps = limit_;
        const bool naive_start =
            looptool::schedule_key(start) == looptool::schedule_key(Program::naive(start.comp));
        std::vector<TuneSeed> seeds = !config_.greedy && config_.tile_seeds && naive_start
                                          ? tune_seeds(*start.comp, limit_, env_.action_space(),
                                                       row_band, env_.config().threads)
                                          : std::vector<TuneSeed>{};
        if (config_.rank) seeds = ranked_seeds(seeds, start, *config_.rank);
        // The seeds before the greedy rollout, whatever the budget: they are fast kernels,
        // cheap to measure, while on a shape unlike LoopTune's grid the rollout alone can spend
        // the budget measuring slow states.
        // The seeds first: the first one is measured without a bound (there is no best yet;
        // a seed is a fast kernel, the naive nest of a large shape is not), every later
        // measurement within a bound from the best so far.
        for (size_t i = 0; i < seeds.size(); ++i) {
            if (i == 0) {
                Program t = start;
                for (Action a : seeds[0].actions) t = looptool::apply(t, a);
                bound_next_measurement();
                env_.reset(t);  // the benchmark's buffers, and the seed's measurement
                seed_nodes_.push_back(add(t, seeds[0].actions, env_.gflops(), 0, seeds[0].name));
            } else {
                add_seed(start, seeds[i]);
            }
        }
        // The policy's chained rollout, before the greedy one (its best bounds their measurements).
        // With no seed, the environment is not on this computation yet: its buffers first.
        if (!config_.greedy && seeds.empty()) env_.reset(start);
        if (!config_.greedy)
            for (const ScoredState &s : chained_rollout(policy_, shadow(), start, limit_)) {
                bound_next_measurement();
                add(s.program, s.actions, env_.evaluate(s.program), 0, "policy chain");
            }
        r.greedy = greedy_rollout(start);
        r.base_gflops = r.greedy.base_gflops;
        r.base_cut_short = env_.cut_short(start);
        // The greedy rollout's states (the start's branch 0 is that rollout): each continues
        // the rollout, so only the last one may continue with a fresh rollout.
        Program p = start;
        for (size_t i = 0; i < r.greedy.actions.size(); ++i) {
            p = looptool::apply(p, r.greedy.actions[i]);
            if (std::isnan(r.greedy.step_gflops[i])) continue;  // not measured (ranked)
            add(p, {r.greedy.actions.begin(), r.greedy.actions.begin() + long(i) + 1},
                r.greedy.step_gflops[i], i + 1 == r.greedy.actions.size() ? 0 : 1, "greedy");
        }
        if (!config_.greedy) {
            while (!out_of_time() && stale_ < kRankPatience) {
                Node *n = next_to_expand();
                if (!n) break;
                const int branch = n->next_branch++;
                rollout(size_t(n - nodes_.data()), branch);
            }
        }
        // The best measured state (on a tie the earliest), or the best finalist.
        const Node *best = &nodes_.front();
        for (const Node &n : nodes_)
            if (n.gflops > best->gflops) best = &n;
        // (--greedy is the greedy rollout alone: its best, as measured.)
        if (config_.bounded_measurements && !config_.greedy) best = &nodes_[final_choice(r)];
        if (whole)
            best = &transfer(*best, *whole, r.best);
        else
            r.best = best->program;
        r.best_gflops = best->gflops;
        r.call_seconds = best->gflops > 0 ? flops_ / (best->gflops * 1e9) : 0;
        r.actions = best->path;
        r.found_by = best->origin;
        for (size_t i : seed_nodes_) r.seed_gflops.emplace_back(nodes_[i].origin, nodes_[i].gflops);
        r.rollouts = rollouts_;
        r.prefix_measurements = env_.prefix_measurements() - prefix0;
        r.schedules = env_.counters().compiles + env_.counters().store_hits - counters0.compiles -
                      counters0.store_hits;
        r.measurements = env_.counters().measurements - counters0.measurements;
        r.seconds = elapsed();
        return r;
    }

    /// Puts the environment back on its configured protocol (and drops what was cut short
    /// from its cache), however the search ends.
    ~Search() {
        if (config_.bounded_measurements) env_.reset_measure_options();
    }

private:
    const Policy &policy_;
    Environment &env_;
    const GuidedConfig &config_;
    const int limit_;
    const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
    std::vector<Node> nodes_;
    std::unordered_map<std::string, size_t> index_;
    std::vector<size_t> seed_nodes_;  // the seeds' nodes
    size_t start_node_ = 0;           // the start's node
    int rollouts_ = 0;
    int stale_ = 0;                        // ranked rollouts in a row that found nothing faster
    std::unique_ptr<Environment> shadow_;  // for unmeasured rollouts (made when first needed)
    Environment &shadow() { return *(shadow_ ? shadow_ : shadow_ = unmeasured_environment(env_)); }
    const double flops_;
    double best_gflops_ = 0;  // the best measured so far, bounds the next measurement
};

}  // namespace

GuidedResult guided_search(const Policy &policy, Environment &env, const Program &start,
                           const GuidedConfig &config) {
    check_guided_config(config, env.config().max_steps);
    const int episode = env.config().max_steps;
    auto limit = [&](const looptool::Computation &c) {
        return config.max_steps > 0 ? config.max_steps
                                    : guided_step_limit(c, episode, env.config().threads);
    };
    const bool naive_start =
        looptool::schedule_key(start) == looptool::schedule_key(Program::naive(start.comp));
    // The computation searched: the whole one, or a conv's slice of images and band of rows.
    const auto slice = config.batch_slice > 0 && naive_start
                           ? conv_batch_slice(*start.comp, config.batch_slice)
                           : std::nullopt;
    const int64_t rows =
        config.band_gflops > 0 && naive_start
            ? conv_band_rows(slice ? *slice : *start.comp, config.band_gflops * 1e9)
            : 0;
    const auto part = rows > 0 ? conv_row_band(slice ? *slice : *start.comp, rows) : slice;
    if (part) {
        const auto sc = std::make_shared<const looptool::Computation>(*part);
        const ConvShape whole = *conv_shape(*start.comp);
        GuidedResult r =
            Search(policy, env, config, limit(*sc), sc->flops())
                .run(Program::naive(sc), &start, rows > 0 && band_hides_row_sweeps(whole));
        if (slice) {
            r.slice_images = config.batch_slice;
            r.batch = whole.batch;
        }
        if (rows > 0) {
            r.band_rows = rows;
            r.rows = whole.ho;
        }
        return r;
    }
    return Search(policy, env, config, limit(*start.comp), start.comp->flops()).run(start);
}

}  // namespace looptune
