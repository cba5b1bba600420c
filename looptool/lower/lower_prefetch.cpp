#include "looptool/lower/lower_prefetch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace looptool::detail {

std::vector<std::string> plan_prefetches(const Computation &c, std::vector<NestPlan> &plans) {
    // The hardware's stream prefetchers stop at a page boundary.
    constexpr int64_t kPageFloats = 4096 / 4;
    std::vector<std::string> log;
    for (size_t ni = 0; ni < plans.size(); ++ni) {
        NestPlan &p = plans[ni];
        p.prefetch.assign(p.slots.size(), 0);
        const std::vector<Loop> &loops = p.nest.loops;
        if (p.mode == NestMode::Generic || loops.empty() || !loops.back().vectorize) continue;
        const size_t vvar = size_t(loops.back().var);
        // The tile's reduction loop: the innermost loop neither vectorized nor unrolled (the
        // tile's k; above it the loops that pick the tile and the block).
        int r = int(loops.size()) - 1;
        while (r >= 0 && (loops[size_t(r)].vectorize || loops[size_t(r)].unroll)) --r;
        if (r <= 0) continue;
        for (size_t s = 0; s < p.slots.size(); ++s) {
            const Slot &slot = p.slots[s];
            // An input, or a pack's copy of one where the nest reads it (the copy nest writes
            // it), as unit-stride vectors.
            const TensorKind kind = c.tensors[size_t(slot.tensor)].kind;
            const bool written =
                std::find(p.out_slot.begin(), p.out_slot.end(), int(s)) != p.out_slot.end();
            if ((kind != TensorKind::Input && kind != TensorKind::Scratch) || written ||
                slot.coef[vvar] != 1)
                continue;
            // The innermost loop above the reduction loop that moves the read.
            int d = r - 1;
            while (d >= 0 && slot.coef[size_t(loops[size_t(d)].var)] == 0) --d;
            if (d < 0) continue;
            const int u = loops[size_t(d)].var;
            // A block-relative copy's next block is written where this one is.
            const int shared = std::max(p.nest.shared, ni > 0 ? plans[ni - 1].nest.shared : 0);
            if (slot.block_relative && d < shared) continue;
            // A loop below walks the same variable, or d is a loop a pack's copy shares with its
            // user (each iteration copies a block).
            bool block = d < p.nest.shared;
            for (size_t e = size_t(d) + 1; e < loops.size(); ++e) block |= loops[e].var == u;
            const int64_t ahead = inner_coverage(p.nest, d) * slot.coef[size_t(u)];
            if (!block || std::llabs(ahead) < kPageFloats) continue;
            p.prefetch[s] = ahead;
            log.push_back(
                fmt::format("nest {}: {} +{}", ni, c.tensors[size_t(slot.tensor)].name, ahead));
        }
    }
    return log;
}

}  // namespace looptool::detail
