#include "search/search.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>

#include "looptool/ir/error.h"

namespace looptune {

using namespace looptool;

const std::vector<SearchAlgorithm> &search_table() {
    using namespace std::placeholders;
    static const std::vector<SearchAlgorithm> table = {
        {"greedy1", "measure every legal next action, take the best; stop when none improves",
         std::bind(detail::greedy, _1, _2, _3, 1)},
        {"greedy2", "as greedy1 with a lookahead of 2 actions",
         std::bind(detail::greedy, _1, _2, _3, 2)},
        {"beam2dfs", "depth-first beam: recurse into the 2 best children",
         std::bind(detail::beam, _1, _2, _3, 2, true)},
        {"beam4dfs", "depth-first beam: recurse into the 4 best children",
         std::bind(detail::beam, _1, _2, _3, 4, true)},
        {"beam2bfs", "breadth-first beam: keep the 2 best distinct children per level",
         std::bind(detail::beam, _1, _2, _3, 2, false)},
        {"beam4bfs", "breadth-first beam: keep the 4 best distinct children per level",
         std::bind(detail::beam, _1, _2, _3, 4, false)},
        {"random", "uniformly random legal walks of the step limit", detail::random_walks},
        {"genetic", "a genetic algorithm over action sequences", detail::genetic},
        {"tile", "the register-tile schedule family for matmuls and conv2d (an expert template)",
         detail::tile_template, kUncutSteps},
    };
    return table;
}

const std::vector<std::string> &search_algorithms() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const auto &a : search_table()) n.push_back(a.name);
        return n;
    }();
    return names;
}

namespace {
const SearchAlgorithm &find_algorithm(const std::string &algo) {
    for (const auto &a : search_table())
        if (a.name == algo) return a;
    throw Error(fmt::format("unknown search algorithm '{}' (known: {})", algo,
                            fmt::join(search_algorithms(), ", ")));
}
}  // namespace

int default_steps(const std::string &algo) { return find_algorithm(algo).default_steps; }

SearchResult run_search(const std::string &algo, Environment &env, const Program &start,
                        const SearchConfig &config) {
    if (config.max_steps < 0)
        throw Error(
            fmt::format("the step limit must be 0 (the algorithm's own) or positive (got {})",
                        config.max_steps));
    if (!(config.budget_s > 0)) throw Error("the budget must be positive");
    const SearchAlgorithm &a = find_algorithm(algo);
    if (config.max_steps > 0) return a.run(env, start, config);
    SearchConfig own = config;
    own.max_steps = a.default_steps;
    return a.run(env, start, own);
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
