// `looptool compare` and `search`'s defaults through the built binary (LOOPTOOL_CLI): defaults
// that give each method what it needs, an empty selection or unknown method refused with why,
// and what the summary table says.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "looptool/gen/generate.h"
#include "test_util.h"

using namespace looptool;
namespace fs = std::filesystem;
using tests::run_cli;
using tests::RunResult;
using tests::slurp;
using tests::write;

namespace {

// Actions of the first `method` row in compare's results.csv (its 8th field).
int actions_in_results(const std::string &csv, const std::string &method) {
    const size_t at = csv.find("," + method + ",");
    if (at == std::string::npos) return -1;
    const size_t line = csv.rfind('\n', at) + 1;
    std::string field;
    size_t pos = line;
    for (int i = 0; i < 8; ++i) {
        const size_t comma = csv.find(',', pos);
        field = csv.substr(pos, comma - pos);
        pos = comma + 1;
    }
    return field.empty() ? 0 : int(std::count(field.begin(), field.end(), ' ')) + 1;
}

}  // namespace

// With the defaults `search --algo tile` runs the template's whole sequences (every register
// tile of a 128x128x64 matmul takes more than 10 actions), and `compare` runs tile, the shipped
// policy (trained for its own step limit) and oneDNN side by side.
TEST(CliCompare, DefaultsGiveEachMethodWhatItNeeds) {
    tests::TempDir dir("cli_compare_defaults");
    write_matmul_dataset({{128, 128, 64}}, (dir.path / "ds").string());
    RunResult s = run_cli(dir, "search --bench ds/mm128_128_64 --algo tile --budget-s 5 --json");
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const size_t from = s.out.find("\"actions\": ["), to = s.out.find(']', from);
    ASSERT_NE(from, std::string::npos) << s.out;
    const std::string actions = s.out.substr(from, to - from);
    EXPECT_GT(std::count(actions.begin(), actions.end(), ','), 10) << actions;
    RunResult c = run_cli(dir,
                          "compare --dataset ds --split all --methods tile,policy,onednn "
                          "--budget-s 2 --final-only --no-plots --out out");
    ASSERT_EQ(c.exit_code, 0) << c.err;
    const std::string csv = slurp(dir.path / "out" / "results.csv");
    EXPECT_GT(actions_in_results(csv, "tile"), 10) << csv;
    EXPECT_GT(actions_in_results(csv, "policy"), 0) << csv;
    EXPECT_NE(csv.find(",onednn,"), std::string::npos) << csv;
}

// A selection with no benchmark (the test split of a small dataset, --benchmarks naming none)
// and an unknown method are errors saying why; nothing is written.
TEST(CliCompare, AnEmptySelectionOrAnUnknownMethodIsAnError) {
    tests::TempDir dir("cli_compare_empty");
    write_matmul_dataset({{8, 8, 16}, {16, 8, 16}, {24, 8, 16}}, (dir.path / "ds").string());
    RunResult r = run_cli(dir, "compare --dataset ds --methods base --no-plots --out out");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("error: compare: the test split of ds holds no benchmark"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("--split all"), std::string::npos) << r.err;
    r = run_cli(dir,
                "compare --dataset ds --split all --benchmarks , --methods base --no-plots "
                "--out out");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("--benchmarks ',' names no benchmark"), std::string::npos) << r.err;
    r = run_cli(dir, "compare --dataset ds --split all --methods base,onedn --no-plots --out out");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("unknown method 'onedn' (known: base, greedy1,"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("onednn"), r.err.rfind("onednn")) << r.err;  // the valid name listed
    EXPECT_NE(r.err.find("policy-greedy"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.path / "out"));
}

// The table: "-" where OpenBLAS was not run, beat/tied/lost against oneDNN beside the geomean
// (also in summary.md and --json), and counts with their nouns in the singular.
TEST(CliCompare, TableShowsDashesAndCountsAgainstTheReference) {
    tests::TempDir dir("cli_compare_table");
    write_matmul_dataset({{16, 8, 16}}, (dir.path / "ds").string());
    RunResult r = run_cli(dir,
                          "compare --dataset ds --split all --methods base,greedy1,onednn "
                          "--budget-s 0.2 --no-plots --out out");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("0.00x"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("beat/tied/lost against onednn"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("plots/"), std::string::npos) << r.out;  // --no-plots
    const std::string md = slurp(dir.path / "out" / "summary.md");
    EXPECT_NE(md.find("| beat / tied / lost vs onednn |"), std::string::npos) << md;
    r = run_cli(dir,
                "compare --dataset ds --split all --methods base,greedy1,onednn --against base "
                "--no-plots --out out --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"against\": \"base\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"beat\": "), std::string::npos) << r.out;
    // One row, failed: "1 of 1 row failed".
    fs::create_directories(dir.path / "bad");
    write(dir, "bad/mm_broken", "looptool-program 1\nname broken\nvar m x\n");
    r = run_cli(dir, "compare --dataset bad --split all --methods base --no-plots --out out2");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("1 of 1 row failed"), std::string::npos) << r.err;
}
