// Random search: uniformly random legal walks of the step limit until the budget runs out;
// every state along a walk is measured (a cache lookup when already seen).
#include <random>

#include "search/search.h"

namespace looptune::detail {

using namespace looptool;

SearchResult random_walks(Environment &env, const Program &start, const SearchConfig &c) {
    SearchState s(env, start, c);
    std::mt19937_64 rng(c.seed);
    s.evaluate(start, {});
    while (!s.out_of_time()) {
        Program p = start;
        std::vector<Action> path;
        for (int i = 0; i < c.max_steps; ++i) {
            auto legal = s.legal_actions(p);
            if (legal.empty()) break;
            Action a = legal[size_t(rng() % legal.size())];
            p = apply(p, a);
            path.push_back(a);
            if (s.evaluate(p, path) < 0) break;
        }
    }
    return s.finish("random");
}

}  // namespace looptune::detail
