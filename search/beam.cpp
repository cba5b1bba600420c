// Beam search of width W, children ranked by measured GFLOPS (LoopTune ranked them by action
// name). Breadth-first keeps the W best distinct states of each level (LoopTune's BFS did not
// prune); depth-first recurses into the W best children of each state, best first.
#include <algorithm>
#include <unordered_set>

#include "search/search.h"

namespace looptune::detail {

using namespace looptool;

namespace {
struct Node {
    Program p;
    std::vector<Action> path;
    double gflops = 0;
};

// Children of `n` ranked by GFLOPS, best first; the sort is stable so ties keep the action
// order and the search stays deterministic.
std::vector<Node> ranked_children(SearchState &s, const Node &n) {
    std::vector<Node> kids;
    for (Action a : s.legal_actions(n.p)) {
        Node k{apply(n.p, a), n.path, 0};
        k.path.push_back(a);
        k.gflops = s.evaluate(k.p, k.path);
        if (k.gflops < 0) break;  // budget exhausted
        kids.push_back(std::move(k));
    }
    std::stable_sort(kids.begin(), kids.end(),
                     [](const Node &x, const Node &y) { return x.gflops > y.gflops; });
    return kids;
}

void dfs(SearchState &s, const Node &n, int width) {
    if (int(n.path.size()) >= s.config.max_steps || s.out_of_time()) return;
    auto kids = ranked_children(s, n);
    for (int i = 0; i < width && i < int(kids.size()); ++i) dfs(s, kids[size_t(i)], width);
}
}  // namespace

SearchResult beam(Environment &env, const Program &start, const SearchConfig &c, int width,
                  bool depth_first) {
    SearchState s(env, start, c);
    Node root{start, {}, s.evaluate(start, {})};
    if (depth_first) {
        dfs(s, root, width);
    } else {
        std::vector<Node> level{root};
        for (int depth = 0; depth < c.max_steps && !level.empty() && !s.out_of_time(); ++depth) {
            std::vector<Node> next;
            for (const auto &n : level)
                for (auto &k : ranked_children(s, n)) next.push_back(std::move(k));
            std::stable_sort(next.begin(), next.end(),
                             [](const Node &x, const Node &y) { return x.gflops > y.gflops; });
            // Keep the W best distinct states (schedule and cursor).
            std::unordered_set<std::string> kept;
            level.clear();
            for (auto &n : next) {
                if (int(level.size()) >= width) break;
                if (kept.insert(schedule_key(n.p) + "@" + std::to_string(n.p.cursor)).second)
                    level.push_back(std::move(n));
            }
        }
    }
    return s.finish(std::string("beam") + std::to_string(width) + (depth_first ? "dfs" : "bfs"));
}

}  // namespace looptune::detail
