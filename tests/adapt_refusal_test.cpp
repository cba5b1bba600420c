// When `train --adapt` installs what it trained: never a network slower side by side, nor one
// whose greedy rollouts lost held-out ground while its seed-start rollouts gained.
#include <gtest/gtest.h>

#include "rl/trainer.h"

namespace {

looptune::TrainSummary adapted(double gain, double start, double end) {
    looptune::TrainSummary s;
    s.adapt_gain = gain;
    s.eval_start_speedup = start;
    s.eval_speedup = end;
    return s;
}

TEST(AdaptRefusal, InstallsAnAdaptationThatGainedOnBothFigures) {
    EXPECT_EQ(looptune::adapt_refusal(adapted(1.02, 3.0, 3.1)), "");
    EXPECT_EQ(looptune::adapt_refusal(adapted(1.0, 3.0, 3.0)), "");
}

TEST(AdaptRefusal, RefusesOneSlowerSideBySide) {
    EXPECT_EQ(looptune::adapt_refusal(adapted(0.97, 3.0, 3.5)),
              "side by side the trained network reaches 0.970x the initial one");
}

TEST(AdaptRefusal, RefusesOneWhoseGreedyHeldOutFigureFell) {
    // As measured on an Intel Xeon: 1.077x side by side from seed starts, greedy 4.19x -> 3.90x.
    EXPECT_EQ(looptune::adapt_refusal(adapted(1.077, 4.19, 3.90)),
              "its greedy rollouts on the test split fell from 4.19x to 3.90x");
}

TEST(AdaptRefusal, FiguresNotMeasuredDoNotRefuse) {
    EXPECT_EQ(looptune::adapt_refusal(adapted(-1, -1, 2.0)), "");
}

}  // namespace
