#include "experiments/compare.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "looptool/error.h"
#include "looptool/generate.h"
#include "test_util.h"

using namespace looptune;
namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path &p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}
CompareConfig small_config(const looptool::tests::TempDir &dir) {
    looptool::write_matmul_dataset({{16, 24, 8}, {20, 12, 10}}, (dir.path / "ds").string());
    CompareConfig c;
    c.dataset_dir = (dir.path / "ds").string();
    c.split = Split::All;
    c.methods = {"base", "greedy1", "random", "openblas"};
    c.budget_s = 0.3;
    c.max_steps = 3;
    c.out_dir = (dir.path / "out").string();
    return c;
}
}  // namespace

TEST(Compare, WritesRowsSummaryAndNonEmptyPlots) {
    looptool::tests::TempDir dir("compare");
    CompareConfig c = small_config(dir);
    std::vector<std::string> progress;
    c.progress = [&](const std::string &line) { progress.push_back(line); };
    auto rows = run_compare(c);
    ASSERT_EQ(rows.size(), 8u);  // 2 benchmarks x 4 methods
    EXPECT_EQ(progress.size(), 8u);
    EXPECT_NE(progress.back().find("ETA"), std::string::npos);
    for (const auto &r : rows) {
        EXPECT_GT(r.gflops, 0) << r.benchmark << " " << r.method;
        if (r.method == "base") EXPECT_DOUBLE_EQ(r.speedup, 1.0);
        if (r.method != "openblas") EXPECT_EQ(r.step_gflops.size(), r.actions.empty() ? 1u
                                              : size_t(std::count(r.actions.begin(), r.actions.end(), ' ') + 2));
    }
    const fs::path out = c.out_dir;
    EXPECT_NE(slurp(out / "results.csv").find("mm16_24_8,greedy1,"), std::string::npos);
    std::string md = slurp(out / "summary.md");
    EXPECT_NE(md.find("| greedy1 | 2 |"), std::string::npos) << md;
    for (const char *png : {"plots/gflops.png", "plots/tuning_time.png", "plots/steps/mm16_24_8.png",
                            "plots/steps/mm20_12_10.png"}) {
        ASSERT_TRUE(fs::exists(out / png)) << png;
        EXPECT_GT(fs::file_size(out / png), 1000u) << png;
        EXPECT_EQ(slurp(out / png).substr(1, 3), "PNG") << png;
    }
    for (const auto &e : fs::recursive_directory_iterator(out))
        EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(Compare, ResumesWithoutRecomputing) {
    looptool::tests::TempDir dir("compare_resume");
    CompareConfig c = small_config(dir);
    c.methods = {"base", "greedy1"};
    c.plots = false;
    auto first = run_compare(c);
    int calls = 0;
    c.progress = [&](const std::string &) { ++calls; };
    auto again = run_compare(c);
    EXPECT_EQ(calls, 0);
    ASSERT_EQ(again.size(), first.size());
    for (size_t i = 0; i < first.size(); ++i)  // the CSV keeps 4 decimals
        EXPECT_NEAR(again[i].gflops, first[i].gflops, 1e-4 + 1e-4 * first[i].gflops);
    c.methods = {"base", "greedy1", "random"};  // a new method: only its rows are computed
    auto more = run_compare(c);
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(more.size(), 6u);
}

TEST(Compare, RejectsUnknownMethodsAndForeignResults) {
    looptool::tests::TempDir dir("compare_bad");
    CompareConfig c = small_config(dir);
    c.methods = {"base", "simulated_annealing"};
    EXPECT_THROW(run_compare(c), looptool::Error);
    c.methods = {"base"};
    fs::create_directories(c.out_dir);
    std::ofstream(fs::path(c.out_dir) / "results.csv") << "something,else\n";
    EXPECT_THROW(run_compare(c), looptool::Error);
}
