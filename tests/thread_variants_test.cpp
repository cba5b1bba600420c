// A schedule's counterparts across `parallel` (search/thread_variants.h): the parallel variant
// of a serial schedule and the serial version of a parallel one are the same loops, both
// verified against the reference on two threads, and each one's counterpart is the other.
#include "search/thread_variants.h"

#include <gtest/gtest.h>

#include <memory>

#include "search/seeds.h"
#include "test_util.h"

using namespace looptool;
using namespace looptune;
using looptool::tests::matches_reference;

namespace {

Jit &two_threads() {
    static const std::unique_ptr<Jit> jit = [] {
        JitOptions o;
        o.threads = 2;
        return Jit::create(o);
    }();
    return *jit;
}

}  // namespace

// Every seed of a few matmuls, one thread's: its parallel variant marks a loop parallel and
// verifies; the serial version of that variant's path is the seed's schedule again.
TEST(ThreadVariants, ParallelThenSerialIsTheSameScheduleAndBothVerify) {
    for (auto [m, n, k] : {std::array<int64_t, 3>{64, 96, 48}, {64, 1, 1216}, {35, 70, 64}}) {
        const Program start = tests::matmul_program(m, n, k);
        for (const TuneSeed &s :
             tune_seeds(start.computation(), kSeedSteps, ActionSpace::preset("full"))) {
            SCOPED_TRACE(start.comp->name + " " + s.name);
            const Program serial = tests::apply_all(start, s.actions);
            ASSERT_FALSE(has_parallel(serial));
            EXPECT_FALSE(serial_path(start, s.actions));  // nothing to remove
            const auto more = parallel_actions(serial, 2);
            ASSERT_TRUE(more);
            std::vector<Action> path = s.actions;
            path.insert(path.end(), more->begin(), more->end());
            const Program parallel = tests::apply_all(start, path);
            EXPECT_TRUE(has_parallel(parallel));
            EXPECT_TRUE(matches_reference(two_threads(), parallel));
            const auto back = serial_path(start, path);
            ASSERT_TRUE(back);
            EXPECT_EQ(schedule_key(tests::apply_all(start, *back)), schedule_key(serial));
        }
    }
}

// The cursor may be anywhere: the variant's actions move it up to the first nest first.
TEST(ThreadVariants, TheParallelVariantStartsFromTheCursorWhereverItIs) {
    const Program start = tests::matmul_program(32, 48, 16);
    for (int flat = 0; flat < start.tree.num_loops(); ++flat) {
        Program p = start;
        p.cursor = flat;
        const auto more = parallel_actions(p, 2);
        ASSERT_TRUE(more) << flat;
        const Program q = tests::apply_all(p, *more);
        EXPECT_TRUE(q.tree.nests.front().loops[0].parallel) << flat;  // the nest that reduces
    }
}

// No variant where the nest that reduces cannot be parallel: a loop shorter than the threads,
// or a reduction outermost.
TEST(ThreadVariants, NoParallelVariantWhereTheWorkCannotBeShared) {
    EXPECT_FALSE(parallel_actions(tests::matmul_program(1, 1, 64), 2));
    EXPECT_FALSE(parallel_actions(tests::matmul_program(3, 3, 8), 4));
    // The nest that reduces is m, k, n: k to the top.
    const Program k_outer = apply(tests::at(tests::matmul_program(8, 8, 8), 0, 1), Action::SwapUp);
    EXPECT_FALSE(parallel_actions(k_outer, 2));
}

// A path whose `parallel` was taken before actions it does not forbid gives them back without
// it; the serial version of a path with no `parallel` is none.
TEST(ThreadVariants, TheSerialPathDropsOnlyTheParallelActions) {
    const Program start = tests::matmul_program(64, 64, 32);
    const std::vector<Action> path{Action::Parallel, Action::Down, Action::Split16,
                                   Action::Down,     Action::Down, Action::Vectorize};
    const Program parallel = tests::apply_all(start, path);
    ASSERT_TRUE(has_parallel(parallel));
    EXPECT_TRUE(matches_reference(two_threads(), parallel));
    const auto serial = serial_path(start, path);
    ASSERT_TRUE(serial);
    EXPECT_EQ(*serial, (std::vector<Action>{Action::Down, Action::Split16, Action::Down,
                                            Action::Down, Action::Vectorize}));
    EXPECT_FALSE(has_parallel(tests::apply_all(start, *serial)));
    EXPECT_FALSE(serial_path(start, *serial));
}
