#include "search/thread_variants.h"

#include <algorithm>

namespace looptune {

using looptool::Action;
using looptool::Program;

bool has_parallel(const Program &p) {
    for (const looptool::Nest &n : p.tree.nests)
        for (const looptool::Loop &l : n.loops)
            if (l.parallel) return true;
    return false;
}

std::optional<std::vector<Action>> parallel_actions(const Program &start, int threads) {
    Program p = start;
    std::vector<Action> out(size_t(p.cursor), Action::Up);
    p.cursor = 0;
    bool work = false;
    for (size_t n = 0; n < p.tree.nests.size(); ++n) {
        const int at = p.tree.flat({int(n), 0});
        Program q = p;
        q.cursor = at;
        // An outermost loop of one iteration (a batch of one) gives way to the loop below it.
        const bool one = q.tree.nests[n].loops[0].size == 1 && q.tree.nests[n].loops[0].tail == 0;
        const bool swap = one && looptool::is_legal(q, Action::SwapDown);
        if (swap) q = looptool::apply(looptool::apply(q, Action::SwapDown), Action::Up);
        const looptool::Loop &l = q.tree.nests[n].loops[0];
        if (l.size + (l.tail > 0) < threads || !looptool::is_legal(q, Action::Parallel)) continue;
        out.insert(out.end(), size_t(at - p.cursor), Action::Down);
        if (swap) out.insert(out.end(), {Action::SwapDown, Action::Up});
        p = looptool::apply(q, Action::Parallel);
        out.push_back(Action::Parallel);
        for (int st : p.tree.nests[n].stmts)
            work = work || p.comp->stmts[size_t(st)].reduce != looptool::ReduceKind::None;
    }
    if (!work) return std::nullopt;
    return out;
}

std::optional<std::vector<Action>> serial_path(const Program &start,
                                               const std::vector<Action> &path) {
    if (std::find(path.begin(), path.end(), Action::Parallel) == path.end()) return std::nullopt;
    std::vector<Action> out;
    Program p = start;
    for (Action a : path) {
        if (a == Action::Parallel) continue;
        if (!looptool::is_legal(p, a)) return std::nullopt;
        p = looptool::apply(p, a);
        out.push_back(a);
    }
    return out;
}

}  // namespace looptune
