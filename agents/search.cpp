#include "agents/search.h"

#include <fmt/format.h>

#include <chrono>

#include "looptool/error.h"

namespace looptune {

using namespace looptool;

const std::vector<std::string> &search_algorithms() {
    static const std::vector<std::string> names = {"greedy1",  "greedy2",  "beam2dfs", "beam4dfs",
                                                   "beam2bfs", "beam4bfs", "random",   "genetic",
                                                   "tile"};
    return names;
}

SearchResult run_search(const std::string &algo, Environment &env, const Program &start,
                        const SearchConfig &config) {
    if (config.max_steps < 1) throw Error("the step limit must be at least 1");
    if (!(config.budget_s > 0)) throw Error("the budget must be positive");
    if (algo == "greedy1") return detail::greedy(env, start, config, 1);
    if (algo == "greedy2") return detail::greedy(env, start, config, 2);
    if (algo == "beam2dfs") return detail::beam(env, start, config, 2, true);
    if (algo == "beam4dfs") return detail::beam(env, start, config, 4, true);
    if (algo == "beam2bfs") return detail::beam(env, start, config, 2, false);
    if (algo == "beam4bfs") return detail::beam(env, start, config, 4, false);
    if (algo == "random") return detail::random_walks(env, start, config);
    if (algo == "genetic") return detail::genetic(env, start, config);
    if (algo == "tile") return detail::tile_template(env, start, config);
    std::string known;
    for (const auto &n : search_algorithms()) known += (known.empty() ? "" : ", ") + n;
    throw Error(fmt::format("unknown search algorithm '{}' (known: {})", algo, known));
}

namespace detail {

namespace {
int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

SearchState::SearchState(Environment &e, const Program &start, const SearchConfig &c)
    : env(e), config(c), best_(start), start_ns_(now_ns()) {
    base_gflops_ = best_gflops_ = evaluate(start, {});
    if (best_gflops_ < 0) base_gflops_ = best_gflops_ = 0;
}

double SearchState::elapsed() const { return double(now_ns() - start_ns_) * 1e-9; }

bool SearchState::out_of_time() const {
    return elapsed() >= config.budget_s ||
           (config.max_schedules > 0 && distinct_ >= config.max_schedules);
}

double SearchState::evaluate(const Program &p, const std::vector<Action> &path) {
    const std::string key = schedule_key(p);
    const bool is_new = !seen_.count(key);
    if (is_new && out_of_time() && distinct_ > 0) {
        exhausted_ = true;
        return -1;
    }
    if (is_new) {
        seen_.insert(key);
        ++distinct_;
    }
    double g = env.evaluate(p);
    if (curve_.empty() || g > best_gflops_) {
        best_gflops_ = g;
        best_ = p;
        best_path_ = path;
        curve_.push_back({elapsed(), best_gflops_, distinct_});
    }
    return g;
}

std::vector<Action> SearchState::legal_actions(const Program &p) const {
    std::vector<Action> out;
    for (Action a : env.action_space().actions)
        if (is_legal(p, a)) out.push_back(a);
    return out;
}

SearchResult SearchState::finish(std::string algo) {
    SearchResult r;
    r.algo = std::move(algo);
    r.best = best_;
    r.best_gflops = best_gflops_;
    r.base_gflops = base_gflops_;
    r.actions = best_path_;
    r.schedules_measured = distinct_;
    r.seconds = elapsed();
    r.budget_exhausted = exhausted_;
    curve_.push_back({r.seconds, best_gflops_, distinct_});
    r.curve = curve_;
    return r;
}

}  // namespace detail
}  // namespace looptune
