// Greedy search with lookahead L: from the current state, measure every legal action sequence
// of up to L actions (bounded by the steps left), take the first action of the best one, and
// stop when no sequence improves on the current state.
#include "search/search.h"

namespace looptune::detail {

using namespace looptool;

namespace {
struct Best {
    double gflops = -1;
    std::vector<Action> seq;
};

// Depth-first enumeration of sequences of up to `depth` actions below `p`.
void expand(SearchState &s, const Program &p, std::vector<Action> &path, size_t prefix, int depth,
            Best &best) {
    if (depth == 0) return;
    for (Action a : s.legal_actions(p)) {
        if (s.out_of_time()) return;
        Program q = apply(p, a);
        path.push_back(a);
        double g = s.evaluate(q, path);
        if (g > best.gflops) {
            best.gflops = g;
            best.seq.assign(path.begin() + std::ptrdiff_t(prefix), path.end());
        }
        expand(s, q, path, prefix, depth - 1, best);
        path.pop_back();
    }
}
}  // namespace

SearchResult greedy(Environment &env, const Program &start, const SearchConfig &c, int lookahead) {
    SearchState s(env, start, c);
    Program cur = start;
    std::vector<Action> path;
    double cur_g = s.evaluate(cur, path);
    while (int(path.size()) < c.max_steps && !s.out_of_time()) {
        Best best;
        std::vector<Action> scratch = path;
        expand(s, cur, scratch, path.size(), std::min(lookahead, c.max_steps - int(path.size())),
               best);
        if (best.seq.empty() || best.gflops <= cur_g) break;
        cur = apply(cur, best.seq.front());
        path.push_back(best.seq.front());
        cur_g = s.evaluate(cur, path);
    }
    return s.finish(lookahead == 1 ? "greedy1" : "greedy2");
}

}  // namespace looptune::detail
