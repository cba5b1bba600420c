// metrics.csv (rl/metrics.h): rows written are read back by column name, a resume's trim
// keeps exactly the rows up to the checkpoint, and an older file's missing columns stay empty.
#include "rl/metrics.h"

#include <gtest/gtest.h>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptune;
using looptool::tests::TempDir;

namespace {

MetricsRow row(int64_t steps, double eval = -1) {
    MetricsRow r;
    r.seconds = steps / 10.0;
    r.env_steps = steps;
    r.updates = steps / 2;
    r.episode_speedup = 1 + steps / 1000.0;
    r.eval_speedup = eval;
    r.steps_per_second = 100;
    r.updates_per_second = 50;
    return r;
}

}  // namespace

TEST(Metrics, RowsAreReadBackByColumnName) {
    TempDir dir("metrics");
    const std::string path = dir / "metrics.csv";
    {
        MetricsWriter w(path, /*append=*/false);
        w.write(row(250));
        w.write(row(500, 1.5));
    }
    MetricsTable t = MetricsTable::read(path);
    ASSERT_EQ(t.rows(), 2u);
    EXPECT_EQ(t.header, metrics_columns());
    EXPECT_EQ(t.value(1, "env_steps"), 500);
    EXPECT_EQ(t.value(1, "updates"), 250);
    EXPECT_EQ(t.value(0, "updates_per_second"), 50);
    EXPECT_FALSE(t.value(0, "eval_speedup").has_value());
    std::vector<double> x, y;
    t.series("env_steps", "eval_speedup", &x, &y);
    EXPECT_EQ(x, std::vector<double>{500});
    EXPECT_EQ(y, std::vector<double>{1.5});
    EXPECT_THROW(t.value(0, "no_such_column"), looptool::Error);
}

TEST(Metrics, TrimKeepsTheRowsUpToTheCheckpointAndTodaysColumns) {
    TempDir dir("metricstrim");
    const std::string path = dir / "metrics.csv";
    // An older run's file: fewer columns, rows past the checkpoint at 500, a row cut by a kill.
    looptool::write_file_atomically(
        path,
        "seconds,env_steps,episodes,updates,epsilon,episode_reward,episode_speedup,loss,"
        "eval_speedup\n"
        "1.0,250,10,125,0.5,0.1,1.2,0.01,\n"
        "2.0,500,20,250,0.4,0.2,1.3,0.01,1.4\n"
        "3.0,750,30,375,0.3,0.3,1.4,0.01,\n"
        "4.0,1000,4");
    EXPECT_EQ(trim_metrics(path, 500), 1u);
    MetricsTable t = MetricsTable::read(path);
    EXPECT_EQ(t.header, metrics_columns());
    ASSERT_EQ(t.rows(), 2u);
    EXPECT_EQ(t.value(1, "env_steps"), 500);
    EXPECT_EQ(t.value(1, "eval_speedup"), 1.4);
    EXPECT_FALSE(t.value(1, "steps_per_second").has_value());
    // Appending after the trim continues the same table.
    MetricsWriter(path, /*append=*/true).write(row(750));
    EXPECT_EQ(MetricsTable::read(path).rows(), 3u);
    EXPECT_EQ(trim_metrics(dir / "missing.csv", 0), 0u);
}

TEST(Metrics, AForeignOrEmptyFileIsAClearError) {
    TempDir dir("metricsbad");
    looptool::tests::write(dir, "empty.csv", "");
    EXPECT_THROW(MetricsTable::read(dir / "empty.csv"), looptool::Error);
    looptool::tests::write(dir, "wide.csv", "a,b\n1,2,3\n");
    try {
        MetricsTable::read(dir / "wide.csv");
        FAIL();
    } catch (const looptool::Error &e) {
        EXPECT_NE(std::string(e.what()).find("wide.csv:2"), std::string::npos) << e.what();
    }
    EXPECT_THROW(MetricsTable::read(dir / "none.csv"), looptool::Error);
}
