#include "tune/guided_finals.h"

#include <algorithm>
#include <numeric>

#include "looptool/ir/error.h"
#include "search/thread_variants.h"
#include "tune/guided_search.h"

namespace looptune {

using looptool::Action;
using looptool::Program;

void Finals::take(const std::vector<SearchNode> &all, size_t i) {
    if (find(all, i) >= 0) return;
    keys.push_back(looptool::schedule_key(all[i].program));
    nodes.push_back(i);
}

long Finals::find(const std::vector<SearchNode> &all, size_t i) const {
    const auto f = std::find(keys.begin(), keys.end(), looptool::schedule_key(all[i].program));
    return f == keys.end() ? -1 : long(f - keys.begin());
}

namespace {

/// The node of the greedy rollout's best, found by its schedule (a seed may have reached it
/// first); none when the rollout never improved on the start.
std::optional<size_t> greedy_node(const std::vector<SearchNode> &nodes,
                                  const PolicyTuneResult &greedy) {
    if (greedy.best_actions.empty()) return std::nullopt;
    const std::string key = looptool::schedule_key(greedy.best);
    for (size_t i = 0; i < nodes.size(); ++i)
        if (looptool::schedule_key(nodes[i].program) == key) return i;
    return std::nullopt;
}

/// `n` on the other side of `parallel` (thread_counterparts()), or none.
std::optional<SearchNode> counterpart(const SearchNode &n, const Program &start, int threads) {
    std::vector<Action> path;
    std::string origin;
    if (has_parallel(n.program)) {
        const auto serial = serial_path(start, n.path);
        if (!serial) return std::nullopt;
        path = *serial;
        origin = n.origin + ", serial";
    } else {
        const auto more = parallel_actions(n.program, threads);
        if (!more) return std::nullopt;
        path = n.path;
        path.insert(path.end(), more->begin(), more->end());
        origin = n.origin + ", parallel";
    }
    Program p = start;
    for (Action a : path) p = looptool::apply(p, a);
    return SearchNode{std::move(p), std::move(path), 0, 0, std::move(origin)};
}

}  // namespace

Finals pick_finals(const std::vector<SearchNode> &nodes, int best, std::optional<size_t> seed,
                   const PolicyTuneResult &greedy, size_t start) {
    std::vector<size_t> order(nodes.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return nodes[a].gflops > nodes[b].gflops; });
    Finals f;
    for (size_t i : order)
        if (f.nodes.size() < size_t(best)) f.take(nodes, i);
    if (seed) f.take(nodes, *seed);
    if (const auto g = greedy_node(nodes, greedy)) f.take(nodes, *g);
    f.take(nodes, start);
    auto fragile = [&](size_t i) { return depends_on_shared_cache(nodes[i].program); };
    if (std::all_of(f.nodes.begin(), f.nodes.end(), fragile))
        for (size_t i : order)
            if (!fragile(i)) {
                f.take(nodes, i);
                break;
            }
    return f;
}

std::vector<SearchNode> thread_counterparts(const std::vector<SearchNode> &nodes, const Finals &f,
                                            const Program &start, int threads) {
    if (threads < 2) return {};
    const std::string start_key = looptool::schedule_key(start);
    std::vector<SearchNode> out;
    std::vector<std::string> keys = f.keys;
    for (size_t i : f.nodes) {
        if (looptool::schedule_key(nodes[i].program) == start_key) continue;
        std::optional<SearchNode> c = counterpart(nodes[i], start, threads);
        if (!c) continue;
        const std::string key = looptool::schedule_key(c->program);
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
        keys.push_back(key);
        out.push_back(std::move(*c));
    }
    return out;
}

}  // namespace looptune
