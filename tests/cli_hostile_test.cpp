// Hostile input through the built `looptool` binary (LOOPTOOL_CLI): values CLI11 would wrap or
// let through, option combinations the help does not allow, arguments for a later run, damaged
// run files and a `pack`ed schedule given back to `export`. Each is refused with one `error:`
// line and exit 1, or, for a valid schedule, accepted.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "looptool/gen/generate.h"
#include "test_util.h"

using namespace looptool;
namespace fs = std::filesystem;
using tests::run_cli;
using tests::RunResult;

namespace {

// One `error:` line naming `want`, exit 1, and nothing created under `dir` by the run.
void expect_refused(const tests::TempDir &dir, const std::string &args, const std::string &want) {
    const auto before = std::distance(fs::recursive_directory_iterator(dir.path),
                                      fs::recursive_directory_iterator());
    RunResult r = run_cli(dir, args);
    EXPECT_EQ(r.exit_code, 1) << args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << args << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos)
        << args << ": want '" << want << "' in " << r.err;
    EXPECT_EQ(std::distance(fs::recursive_directory_iterator(dir.path),
                            fs::recursive_directory_iterator()),
              before)
        << args;
}

}  // namespace

TEST(CliHostile, ValuesBeyondTheirTypeAndDisallowedCombinationsAreRefused) {
    tests::TempDir dir("cli_hostile");
    write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    // CLI11 turns -1 into 2^64 - 1 for an unsigned seed, and 2^64 bytes into a wrapped size.
    expect_refused(dir, "generate --random 2 --seed -1 --out g", "--seed");
    expect_refused(dir, "search --bench ds/mm8_8_8 --algo random --seed -3", "--seed");
    expect_refused(dir, "train --dataset ds --out run --split-seed -1", "--split-seed");
    expect_refused(dir, "read --bench ds/mm8_8_8 --actions down --max-memory 18446744073709551616",
                   "--max-memory");
    expect_refused(dir, "read --bench ds/mm8_8_8 --actions down --max-memory 9223372036854775808",
                   "--max-memory");
    // --dataset searches a split "instead": with --bench too, one of them would be ignored.
    expect_refused(dir, "search --bench ds/mm8_8_8 --dataset ds", "excludes");
    // The help says looptune or full; the layout space's actions change the network's input.
    expect_refused(dir, "train --dataset ds --out run --space everything", "--space");
    expect_refused(dir, "train --dataset ds --out run --episode-steps 100000", "--episode-steps");
    // Arguments for a job that would wait in a queue are checked now.
    expect_refused(dir, "slurm-train --out run --dry-run -- --dataset ds --bogus-option",
                   "--bogus-option");
    expect_refused(dir, "slurm-train --out run --dry-run -- --dataset ds --lr nan", "--lr");
    RunResult ok = run_cli(dir, "slurm-train --out run --dry-run -- --dataset ds --steps 10");
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_NE(ok.out.find(" train --dataset ds --steps 10 --out "), std::string::npos) << ok.out;
}

TEST(CliHostile, MessagesSayWhatIsWrongInPlainWords) {
    tests::TempDir dir("cli_words");
    RunResult g = run_cli(dir, "generate --dimA 8,8 --dimB 8,8 --out one");
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("wrote 1 benchmark to one"), std::string::npos) << g.out;
    tests::write(dir, "twice.lt",
                 "looptool-program 1\nname a\nname b\nvar m 4\ntensor A input 4\n"
                 "tensor C output 4\nstmt C[m] = A[m]\nnest 0\nloop m 4 0\ncursor 0\n");
    expect_refused(dir, "read --no-measure --bench twice.lt", "twice.lt:3: a second 'name' line");
    expect_refused(dir, "export --bench one/mm8_8_8 --out x --name memset",
                   "'memset' is a C library function");
    expect_refused(dir, "export --bench one/mm8_8_8 --out x --name int", "'int' is a C or C++");
}

TEST(CliHostile, ResumingFromADamagedCheckpointIsOneLine) {
    tests::TempDir dir("cli_resume");
    write_matmul_dataset({{8, 8, 8}, {8, 16, 8}}, (dir.path / "ds").string());
    fs::create_directories(dir.path / "run");
    tests::write(dir, "run/checkpoint.pt", std::string(3000, '\x7f'));
    RunResult r = run_cli(dir, "train --dataset ds --out run --resume --steps 10 --quiet");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: cannot resume from ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// `export --schedule` takes tune's (or read's) program back even when a layout action changed
// its computation: `pack` adds a scratch copy of B and cuts n in two.
TEST(CliHostile, ExportTakesAPackedScheduleOfTheBenchmark) {
    tests::TempDir dir("cli_packed");
    write_matmul_dataset({{64, 64, 64}}, (dir.path / "ds").string());
    RunResult r = run_cli(dir,
                          "read --no-measure --json --space layout --bench ds/mm64_64_64 --actions "
                          "split_8,down,swap_down,down,split_32,swap_up,swap_up,swap_up,down,pack");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string program = nlohmann::json::parse(r.out)["program"];
    ASSERT_NE(program.find("B_packed"), std::string::npos) << program;
    tests::write(dir, "packed.program", program);
    RunResult e = run_cli(dir, "export --bench ds/mm64_64_64 --schedule packed.program --out k");
    EXPECT_EQ(e.exit_code, 0) << e.err;
    EXPECT_TRUE(fs::exists(dir.path / "k" / "mm64_64_64.o"));
    EXPECT_EQ(tests::slurp(dir.path / "k" / "mm64_64_64.program"), program);
    // Another benchmark's program, and this one's computing something else, are refused.
    write_matmul_dataset({{64, 64, 32}}, (dir.path / "other").string());
    expect_refused(dir, "export --bench other/mm64_64_32 --schedule packed.program --out k2",
                   "is not the one in other/mm64_64_32");
    std::string wrong = program;
    const size_t at = wrong.find("A[m, k] * B_packed");
    ASSERT_NE(at, std::string::npos) << program;
    wrong.replace(at, 18, "A[m, k] + B_packed");
    tests::write(dir, "wrong.program", wrong);
    expect_refused(dir, "export --bench ds/mm64_64_64 --schedule wrong.program --out k3",
                   "computes something else");
}
