// The random-schedule check at a small count (the benchmark-sized run is
// benchmarks/random_schedule_check, docs/reliability.md).
#include "looptool/schedule_check.h"

#include <gtest/gtest.h>

using namespace looptool;

TEST(ScheduleCheck, RandomSequencesOnOddShapesMatchInInterpreterAndJit) {
    auto jit = Jit::create();
    ScheduleCheckOptions o;
    o.sequences = 100;
    o.seed = 12;
    o.max_volume = 1 << 17;
    ScheduleCheckResult r = check_random_schedules(o, *jit);
    EXPECT_EQ(r.sequences, 100);
    EXPECT_GT(r.actions, 100);
    EXPECT_GT(r.distinct_shapes, 40);  // the shapes vary, not one shape 100 times
    for (const auto &f : r.failures) ADD_FAILURE() << f;
    EXPECT_TRUE(r.ok());
}

// With the layout actions drawn too: packs (copies made before a nest or block by block inside
// the loops it shares with the next one), flattens, and everything after them.
TEST(ScheduleCheck, RandomSequencesWithTheLayoutActionsMatchToo) {
    auto jit = Jit::create();
    ScheduleCheckOptions o;
    o.sequences = 100;
    o.seed = 13;
    o.max_volume = 1 << 17;
    o.space = "layout";
    ScheduleCheckResult r = check_random_schedules(o, *jit);
    EXPECT_EQ(r.sequences, 100);
    for (const auto &f : r.failures) ADD_FAILURE() << f;
    EXPECT_TRUE(r.ok());
}
