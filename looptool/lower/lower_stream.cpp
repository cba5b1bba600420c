#include "looptool/lower/lower_stream.h"

#include "util/machine.h"

namespace looptool::detail {

int64_t last_level_cache_bytes() { return looptune::cache_sizes().llc; }

std::vector<std::string> plan_streaming_stores(const Computation &c, std::vector<NestPlan> &plans,
                                               int64_t min_bytes) {
    std::vector<std::string> names;
    if (min_bytes < 0) min_bytes = last_level_cache_bytes() / 2;
    if (min_bytes == 0) return names;
    for (size_t t = 0; t < c.tensors.size(); ++t) {
        const Tensor &ten = c.tensors[t];
        if (ten.kind != TensorKind::Output || ten.num_elements() * 4 < min_bytes) continue;
        int writers = 0, assignments = 0;
        bool read = false;
        for (const Statement &s : c.stmts) {
            read |= reads_tensor(s, int(t));
            if (s.out.tensor != int(t)) continue;
            ++writers;
            assignments += s.reduce == ReduceKind::None;
        }
        if (read || writers != 1 || assignments != 1) continue;
        for (NestPlan &p : plans)
            for (size_t i = 0; i < p.nest.stmts.size(); ++i)
                if (c.stmts[size_t(p.nest.stmts[i])].out.tensor == int(t)) p.streamed[i] = true;
        names.push_back(ten.name);
    }
    return names;
}

}  // namespace looptool::detail
