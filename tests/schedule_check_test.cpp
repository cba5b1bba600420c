// The random-schedule check at a small count (the benchmark-sized run is
// benchmarks/random_schedule_check, docs/reliability.md).
#include "looptool/check/schedule_check.h"

#include <gtest/gtest.h>

using namespace looptool;

namespace {

// 100 sequences of `space`'s actions on shapes of up to 2^17 iterations.
ScheduleCheckResult check_100(uint64_t seed, const std::string &space, int threads = 0) {
    JitOptions jo;
    jo.threads = threads;
    auto jit = Jit::create(jo);
    ScheduleCheckOptions o;
    o.sequences = 100;
    o.seed = seed;
    o.max_volume = 1 << 17;
    o.space = space;
    return check_random_schedules(o, *jit);
}

}  // namespace

TEST(ScheduleCheck, RandomSequencesOnOddShapesMatchInInterpreterAndJit) {
    ScheduleCheckResult r = check_100(12, "full");
    EXPECT_EQ(r.sequences, 100);
    EXPECT_GT(r.actions, 100);
    EXPECT_GT(r.distinct_shapes, 40);  // the shapes vary, not one shape 100 times
    for (const auto &f : r.failures) ADD_FAILURE() << f;
    EXPECT_TRUE(r.ok());
}

// With the layout actions drawn too: packs (copies made before a nest or block by block inside
// the loops it shares with the next one), flattens, and everything after them.
TEST(ScheduleCheck, RandomSequencesWithTheLayoutActionsMatchToo) {
    ScheduleCheckResult r = check_100(13, "layout");
    EXPECT_EQ(r.sequences, 100);
    for (const auto &f : r.failures) ADD_FAILURE() << f;
    EXPECT_TRUE(r.ok());
}

// With `parallel` drawn too, on 3 threads: the parallel loops' kernels, and every action after
// the mark, on every kind of program.
TEST(ScheduleCheck, RandomSequencesWithParallelLoopsMatchToo) {
    ScheduleCheckResult r = check_100(14, "threads", 3);
    EXPECT_EQ(r.sequences, 100);
    for (const auto &f : r.failures) ADD_FAILURE() << f;
    EXPECT_TRUE(r.ok());
}
