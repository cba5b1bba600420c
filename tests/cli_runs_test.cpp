// Long runs and options through the built `looptool` binary (LOOPTOOL_CLI): a run over many
// items records a failed item and goes on, exiting 2 at the end; every out-of-range option is
// refused at parse time with one line naming it; nothing is left half-written.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "looptool/gen/generate.h"
#include "test_util.h"

using namespace looptool;
namespace fs = std::filesystem;
using tests::run_cli;
using tests::RunResult;
using tests::slurp;
using tests::write;

namespace {

int count_lines(const std::string &s) { return int(std::count(s.begin(), s.end(), '\n')); }

int count_of(const std::string &s, const std::string &part) {
    int n = 0;
    for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
    return n;
}

}  // namespace

TEST(CliOptions, OutOfRangeValuesAreRefusedWithOneLineNamingTheOption) {
    tests::TempDir dir("cli_options");
    write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    struct Case {
        const char *args, *option;
    };
    // A representative set (each train run loads LibTorch, ~1.5 s); every option's range is in
    // its --help. A refused option must not create anything.
    const std::vector<Case> cases = {
        {"read --bench ds/mm8_8_8 --tolerance nan", "--tolerance"},
        {"search --bench ds/mm8_8_8 --algo genetic --population 0", "--population"},
        {"search --bench ds/mm8_8_8 --algo genetic --mutation -1", "--mutation"},
        {"search --bench ds/mm8_8_8 --algo genetic --crossover 7", "--crossover"},
        {"compare --dataset ds --out out --budget-s inf", "--budget-s"},
        {"validate e.csv --tolerance-pct -5", "--tolerance-pct"},
        {"train --dataset ds --out run --hidden 0", "--hidden"},
        {"train --dataset ds --out run --lr nan", "--lr"},
        {"train --dataset ds --out run --steps -100", "--steps"},
        {"peak --seconds nan --no-store", "--seconds"},
        {"tune --bench ds/mm8_8_8 --band-gflops nan", "--band-gflops"},
        {"tune --bench ds/mm8_8_8 --prefix-gflops -1", "--prefix-gflops"},
    };
    for (const auto &c : cases) {
        RunResult r = run_cli(dir, c.args);
        EXPECT_EQ(r.exit_code, 1) << c.args << "\nstderr: " << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << c.args << "\nstderr: " << r.err;
        EXPECT_EQ(r.err.rfind(std::string("error: ") + c.option + ": ", 0), 0u)
            << c.args << "\nstderr: " << r.err;
        EXPECT_FALSE(fs::exists(dir.path / "out")) << c.args;
        EXPECT_FALSE(fs::exists(dir.path / "run")) << c.args;
    }
    // Values at the edges of the ranges are accepted.
    RunResult ok = run_cli(
        dir,
        "search --bench ds/mm8_8_8 --algo genetic --population 2 --mutation 0 --crossover 1 "
        "--budget-s 0.2 --steps 1 --json");
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// `looptool` links no LibTorch: it lists train and policy and runs them in looptool-train, so
// from the command line they are as before: their own --help, options and exit codes.
TEST(CliRelease, TrainAndPolicyRunInLooptoolTrainUnchanged) {
    tests::TempDir dir("cli_release");
    RunResult r = run_cli(dir, "--help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("  train "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  policy "), std::string::npos) << r.out;
    r = run_cli(dir, "train --help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char *option : {"--dataset", "--encoder", "--gnn-rounds", "--distributed"})
        EXPECT_NE(r.out.find(option), std::string::npos) << option << "\n" << r.out;
    r = run_cli(dir, "policy convert --help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("IN"), std::string::npos) << r.out;
    r = run_cli(dir, "policy convert missing.pt out.policy");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err, "error: cannot open policy file missing.pt\n");
    EXPECT_FALSE(fs::exists(dir.path / "out.policy"));
}

TEST(CliRuns, CompareWithABadFileAndAFailingBenchmarkFinishesEveryOtherRow) {
    tests::TempDir dir("cli_compare_failed");
    // A malformed file, and a well-formed benchmark that fails: its buffers (192 MiB) exceed
    // --max-memory, so it is refused before anything is allocated.
    write_matmul_dataset({{8, 8, 8}, {12, 8, 4}, {16, 4, 8}, {4096, 4096, 4096}},
                         (dir.path / "ds").string());
    write(dir, "ds/mm_broken", "looptool-program 1\nname broken\nvar m x\n");
    RunResult r = run_cli(dir,
                          "compare --dataset ds --split all --methods base,greedy1 --budget-s 0.2 "
                          "--steps 2 --max-memory 64MB --no-plots --out out --json");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("error: mm_broken base: ds/mm_broken:3: 'x' is not an integer"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("error: mm4096_4096_4096 base: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("4 of 10 rows failed"), std::string::npos) << r.err;
    const std::string csv = slurp(dir.path / "out" / "results.csv");
    for (const char *row : {"mm8_8_8,base,", "mm8_8_8,greedy1,", "mm12_8_4,base,",
                            "mm12_8_4,greedy1,", "mm16_4_8,base,", "mm16_4_8,greedy1,"}) {
        const size_t at = csv.find(row);
        ASSERT_NE(at, std::string::npos) << row << "\n" << csv;
        EXPECT_EQ(csv.substr(at, csv.find('\n', at) - at).back(), ',')
            << row << ": measured, no error";
        EXPECT_EQ(csv.find(std::string(row) + "0.0000,"), std::string::npos)
            << row << ": GFLOPS measured";
    }
    EXPECT_NE(csv.find("mm4096_4096_4096,greedy1,0.0000,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("mm_broken,greedy1,0.0000,"), std::string::npos) << csv;
    EXPECT_NE(r.out.find("\"failed\": ["), std::string::npos) << r.out;
    EXPECT_NE(slurp(dir.path / "out" / "summary.md").find("## Failed"), std::string::npos);
}

TEST(CliRuns, CompareThatCannotStartLeavesNoOutputDirectory) {
    tests::TempDir dir("cli_compare_no_out");
    write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    RunResult r = run_cli(
        dir, "compare --dataset ds --split all --benchmarks mm9_9_9 --methods base --out out");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("mm9_9_9"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.path / "out"));
}

TEST(CliRuns, SearchAndTuneOverSeveralBenchmarksRecordAFailedOneAndGoOn) {
    tests::TempDir dir("cli_search_failed");
    write_matmul_dataset({{8, 8, 8}, {12, 8, 4}}, (dir.path / "ds").string());
    write(dir, "ds/mm_broken", "looptool-program 1\nname broken\nvar m x\n");
    RunResult s =
        run_cli(dir,
                "search --dataset ds --split all --algo greedy1 --budget-s 0.2 --steps 2 --json "
                "--trace traces.csv");
    EXPECT_EQ(s.exit_code, 2) << s.err;
    EXPECT_NE(
        s.err.find("error: ds/mm_broken:3: 'x' is not an integer (recorded as failed; going on)"),
        std::string::npos)
        << s.err;
    EXPECT_NE(s.err.find("1 of 3 benchmarks failed"), std::string::npos) << s.err;
    EXPECT_NE(s.out.find("\"failed\": true"), std::string::npos) << s.out;
    EXPECT_EQ(count_lines(slurp(dir.path / "traces.csv")), 3);  // header and the two that ran
    RunResult t = run_cli(dir, "tune --bench ds/mm_broken --bench ds/mm8_8_8");
    EXPECT_EQ(t.exit_code, 2) << t.err;
    EXPECT_NE(t.out.find("mm8_8_8: "), std::string::npos) << t.out;  // tuned after the failure
    EXPECT_NE(t.err.find("1 of 2 benchmarks failed"), std::string::npos) << t.err;
    write(dir, "episodes.csv",
          "benchmark,actions,gflops\nds/mm_broken,down,3\nds/mm8_8_8,split_2,1\n");
    RunResult v = run_cli(dir, "validate episodes.csv --tolerance-pct 1000000 --json");
    EXPECT_EQ(v.exit_code, 2) << v.err;
    EXPECT_NE(v.err.find("episode 1: ds/mm_broken:3"), std::string::npos) << v.err;
    EXPECT_NE(v.out.find("\"disagreements\": 1"), std::string::npos) << v.out;
    EXPECT_NE(v.out.find("\"measured_gflops\""), std::string::npos) << v.out;  // episode 2 replayed
}

TEST(CliRuns, TrainLeavesAFailingEvaluationBenchmarkOutAndGoesOn) {
    tests::TempDir dir("cli_train_eval_failed");
    // Two of LoopTune's test names, so both fall in the test split: one broken, one fine.
    write_matmul_dataset({{8, 8, 8}, {12, 8, 4}, {16, 8, 8}, {64, 240, 64}},
                         (dir.path / "ds").string());
    write(dir, "ds/mm112_208_256", "looptool-program 1\nname broken\nvar m x\n");
    RunResult r =
        run_cli(dir,
                "train --dataset ds --out run --steps 40 --episode-steps 4 --hidden 16 "
                "--batch 8 --learning-starts 16 --eval-every 20 --no-plots --quiet --json");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    // Reported once, when it first fails, then left out of the later evaluations.
    EXPECT_EQ(count_of(r.err, "evaluation: ds/mm112_208_256"), 1) << r.err;
    EXPECT_NE(r.err.find("ds/mm112_208_256:3: 'x' is not an integer"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("\"env_steps\": 40"), std::string::npos) << r.out;  // trained to the end
    EXPECT_NE(r.out.find("\"benchmark\": \"ds/mm112_208_256\""), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(dir.path / "run/trained.policy"));
}

TEST(CliRuns, SearchTraceNamingADirectorySaysSo) {
    tests::TempDir dir("cli_trace_dir");
    write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    fs::create_directory(dir.path / "traces");
    RunResult r = run_cli(dir, "search --bench ds/mm8_8_8 --budget-s 0.2 --steps 1 --trace traces");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("traces: is a directory, not a trace file"), std::string::npos) << r.err;
}

// `train --adapt` starts from a policy's weights (evaluated before the first step), keeps its
// network, and installs the result for this machine only when side by side it is not slower;
// `tune` then picks it up. A network of another shape is refused, naming a tensor.
TEST(CliRuns, TrainAdaptStartsFromAPolicyAndInstallsItForThisMachine) {
    tests::TempDir dir("cli_train_adapt");
    write_matmul_dataset({{8, 8, 8}, {12, 8, 4}, {16, 8, 8}, {64, 240, 64}},
                         (dir.path / "ds").string());
    const std::string small = "--episode-steps 4 --hidden 16 --batch 8 --learning-starts 16 ";
    RunResult r =
        run_cli(dir, "train --dataset ds --out run0 --steps 20 --no-plots --quiet " + small);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string cache = (dir.path / "cache").string();
    const char *old = std::getenv("XDG_CACHE_HOME");
    const std::string saved = old ? old : "";
    setenv("XDG_CACHE_HOME", cache.c_str(), 1);
    r = run_cli(dir,
                "train --adapt --init-policy run0/trained.policy --dataset ds --out run1 "
                "--steps 40 --eval-every 20 --batch 8 --learning-starts 16 --no-plots --json");
    RunResult bad = run_cli(dir,
                            "train --init-policy run0/trained.policy --dataset ds --out run2 "
                            "--steps 8 --hidden 32 --episode-steps 4 --no-plots --quiet");
    const std::vector<fs::path> installed = [&] {
        std::vector<fs::path> v;
        if (fs::exists(cache + "/looptune/policies"))
            for (const auto &e : fs::directory_iterator(cache + "/looptune/policies"))
                v.push_back(e.path());
        return v;
    }();
    RunResult t = run_cli(dir, "tune --bench ds/mm16_8_8 --budget-s 0.2");
    if (old)
        setenv("XDG_CACHE_HOME", saved.c_str(), 1);
    else
        unsetenv("XDG_CACHE_HOME");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("starting from the weights of run0/trained.policy"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("before training: test geomean speedup"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("\"eval_start_speedup\": -1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"env_steps\": 40"), std::string::npos) << r.out;
    EXPECT_NE(slurp(dir.path / "run1/trained.policy").find("\"hidden\":16"), std::string::npos);
    EXPECT_NE(r.err.find("side by side on "), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("\"adapt_gain\": -1"), std::string::npos) << r.out;
    if (r.err.find("not installed: ") == std::string::npos) {
        ASSERT_EQ(installed.size(), 1u) << r.err;
        EXPECT_NE(r.err.find("installed for this machine: " + installed[0].string()),
                  std::string::npos)
            << r.err;
        EXPECT_NE(t.out.find("policy " + installed[0].string()), std::string::npos) << t.out;
    } else {
        EXPECT_TRUE(installed.empty());
    }
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("does not match this run's"), std::string::npos) << bad.err;
}
