// benchmarks/matmul_bench.cpp's --schedules: given schedules and oneDNN timed side by side.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace looptool;

namespace {
tests::RunResult bench(const tests::TempDir &dir, const std::string &args) {
    return tests::run_program(dir, MATMUL_BENCH, args + " --rounds 2 --min-time 0.001");
}
}  // namespace

TEST(MatmulBench, TimesGivenSchedulesBesideOneDnnAndSkipsOnesThatDoNotApply) {
    tests::TempDir dir("matmul_bench");
    tests::write(dir, "s.txt",
                 "# a register tile, a packed one, and one too large for the shape\n"
                 "tile: split_8,down,down,down,split_16,swap_up,swap_up,down,swap_down,unroll,"
                 "down,vectorize\n"
                 "packed: split_8,down,down,down,split_16,swap_up,swap_up,swap_up,down,down,"
                 "swap_down,unroll,down,vectorize,up,up,up,pack\n"
                 "too big: split_64\n");
    const auto r = bench(dir, "--schedules s.txt --shapes mm32_48_40 --json out.json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("mm32_48_40 tile "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("mm32_48_40 packed "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("mm32_48_40 oneDNN "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("too big: does not apply"), std::string::npos) << r.out;
    // Two figures (one per round) for each side that ran.
    const auto json = nlohmann::json::parse(tests::slurp(dir.path / "out.json"));
    std::vector<std::string> sides;
    for (const auto &g : json.at("given")) {
        sides.push_back(g.at("schedule"));
        EXPECT_EQ(g.at("gflops").size(), 2u) << g.dump();
    }
    EXPECT_EQ(sides, (std::vector<std::string>{"tile", "packed", "oneDNN"}));
}

TEST(MatmulBench, ABadSchedulesFileIsOneLineNamingTheLine) {
    tests::TempDir dir("matmul_bench_bad");
    tests::write(dir, "colon.txt", "tile: split_8\nno colon here\n");
    tests::write(dir, "action.txt", "tile: split_8,sideways\n");
    tests::write(dir, "empty.txt", "# nothing\n");
    struct Case {
        const char *file, *message;
    };
    for (const Case &c :
         {Case{"colon.txt", "colon.txt:2: expected `name: action,action,...`"},
          Case{"action.txt", "action.txt:1: unknown action 'sideways'"},
          Case{"empty.txt", "empty.txt: no schedule"}, Case{"missing.txt", "missing.txt"}}) {
        const auto r = bench(dir, std::string("--schedules ") + c.file + " --shapes mm32_48_40");
        EXPECT_NE(r.exit_code, 0) << c.file;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << c.file << ": " << r.err;
        EXPECT_EQ(r.out.find("GFLOPS ("), std::string::npos) << c.file;  // nothing measured
    }
}
