// The block kernel lt_sgemm tiles unseen shapes over: tuned, either by `tune` (an entry of its
// shape) or here, by measuring tune's seed schedules, the members of the tile template tune
// itself measures first.
#include <fmt/format.h>

#include <memory>

#include "lib/kernel_library.h"
#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"
#include "search/seeds.h"

namespace looptune {

LibraryEntry block_kernel_entry(const std::vector<LibraryEntry> &entries,
                                const std::array<int64_t, 3> &shape, std::string &source) {
    const std::vector<int64_t> want(shape.begin(), shape.end());
    for (const LibraryEntry &e : entries)
        if (e.kind == "matmul" && e.shape == want) {
            source = "library";
            return e;
        }
    auto c = std::make_shared<looptool::Computation>(
        looptool::make_matmul(shape[0], shape[1], shape[2],
                              fmt::format("lt_block_{}_{}_{}", shape[0], shape[1], shape[2])));
    const looptool::Program naive = looptool::Program::naive(c);
    auto jit = looptool::Jit::create();
    looptool::Buffers buffers = looptool::make_buffers(*c, 1);
    looptool::MeasureOptions mo;
    mo.warmup = 2;
    mo.min_runs = 5;
    mo.min_time_s = 0.02;
    mo.time_cap_s = 0.5;
    LibraryEntry best;
    for (const TuneSeed &seed : tune_seeds(*c, kSeedSteps, looptool::ActionSpace::preset("full"))) {
        looptool::Program p = naive;
        try {
            for (looptool::Action a : seed.actions) p = looptool::apply(p, a);
        } catch (const looptool::Error &) {
            continue;  // a seed whose steps this shape does not allow
        }
        const looptool::Measurement m =
            looptool::measure_kernel(jit->compile(p).fn, *c, buffers, mo);
        if (m.timed_out || m.median_gflops <= best.gflops) continue;
        best.gflops = m.median_gflops;
        best.program = looptool::serialize(p);
        best.actions = looptool::action_names(seed.actions);
        source = "seed " + seed.name;
    }
    LT_CHECK(!best.program.empty(), "lib build: no seed schedule for the block kernel");
    const looptool::Comparison check =
        looptool::verify_schedule(looptool::parse_program(best.program, "the block kernel"));
    if (!check.ok)
        throw looptool::InternalError("lib build: the block kernel's schedule (" + source +
                                      ") does not match the reference: " + check.first_mismatch);
    best.verified = true;
    best.name = c->name;
    best.kind = "matmul";
    best.shape = want;
    best.start_gflops = 0;
    return best;
}

}  // namespace looptune
