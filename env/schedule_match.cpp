#include "env/schedule_match.h"

#include <fmt/format.h>

#include "env/environment.h"
#include "looptool/ir/error.h"

namespace looptune {

void check_schedule_of(const looptool::Program &bench, const std::string &bench_path,
                       const looptool::Program &schedule, const std::string &schedule_path) {
    const looptool::Computation &b = bench.computation(), &s = schedule.computation();
    if (s == b) return;
    const std::string head = fmt::format("{}: its computation '{}' is not the one in {} ('{}')",
                                         schedule_path, s.name, bench_path, b.name);
    if (s.name != b.name) throw looptool::Error(head + ": another name");
    if (!looptool::same_storage(s, b))
        throw looptool::Error(head + ": other tensors (names, kinds or sizes)");
    // A layout action's program: the same buffers, so its kernel runs on the benchmark's.
    EnvConfig cfg;
    cfg.measure_enabled = false;
    Environment env(cfg);
    env.reset(bench);
    const looptool::Comparison c = env.verify(schedule);
    if (!c.ok)
        throw looptool::Error(fmt::format(
            "{}: it has the benchmark's tensors but computes something else ({} of {} differ "
            "from the benchmark's reference; first {})",
            head, c.mismatches, c.coverage(), c.first_mismatch));
}

}  // namespace looptune
