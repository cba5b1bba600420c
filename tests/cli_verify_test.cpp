// The built `looptool` on verification, oversized problems and quoted file content
// (docs/measurement.md): what a user sees, and the exit codes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include "looptool/formats/text_format.h"
#include "looptool/ir/memory.h"
#include "tests/test_util.h"

namespace looptool {
namespace {

using tests::run_cli;
using tests::TempDir;

void write_matmul(const TempDir &dir, const std::string &name, int64_t m, int64_t n, int64_t k) {
    tests::write(dir, name,
                 serialize(Program::naive(std::make_shared<Computation>(make_matmul(m, n, k)))));
}

size_t lines(const std::string &s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

TEST(CliVerify, AnOversizedProblemIsRefusedAtOnceWithTheFigure) {
    TempDir dir("cli_verify_big");
    write_matmul(dir, "big.txt", 40000, 40000, 40000);
    setenv("MAX_GFLOPS", "100", 1);
    if (available_memory() >= int64_t(25.6e9)) GTEST_SKIP() << "this machine has room for 25.6 GB";
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_cli(dir, "read --bench big.txt");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("error: mm40000_40000_40000: needs 25.6 GB for its tensors"),
              std::string::npos)
        << r.err;
    // --max-memory refuses what would fit.
    write_matmul(dir, "mm.txt", 64, 64, 64);
    r = run_cli(dir, "search --bench mm.txt --algo greedy1 --budget-s 1 --max-memory 20kB");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("above the memory limit of 20.0 kB (--max-memory)"), std::string::npos)
        << r.err;
    r = run_cli(dir, "read --bench mm.txt --max-memory -5");
    EXPECT_NE(r.exit_code, 0);
}

TEST(CliVerify, ToleranceIsAFiniteFactorAtLeastZero) {
    TempDir dir("cli_verify_tol");
    write_matmul(dir, "mm.txt", 8, 8, 8);
    for (const char *bad : {"-1", "nan", "inf", "x"}) {
        auto r = run_cli(dir, std::string("read --bench mm.txt --no-measure --tolerance ") + bad);
        EXPECT_NE(r.exit_code, 0) << bad;
        EXPECT_NE(r.err.find("--tolerance"), std::string::npos) << bad << ": " << r.err;
    }
    auto r = run_cli(dir, "read --bench mm.txt --no-measure --tolerance 2 --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"verified\": true"), std::string::npos) << r.out;
}

TEST(CliVerify, NaNAndInfinityEqualToTheReferencesMatch) {
    TempDir dir("cli_verify_nan");
    // (A - A) / 0 is NaN everywhere, A / 0 is +-inf: both are what the reference computes.
    tests::write(dir, "div0.txt", R"(looptool-program 1
name div0
var m 4
var n 16
tensor A input 4 16
tensor C output 4 16
tensor D output 4 16
stmt C[m, n] = (A[m, n] - A[m, n]) / 0
stmt D[m, n] = A[m, n] / 0
nest 0 1
loop m 4 0
loop n 16 0
cursor 0
)");
    setenv("MAX_GFLOPS", "100", 1);
    for (const char *how : {"--no-measure", ""}) {  // the interpreter; the interpreter and the JIT
        auto r = run_cli(
            dir, std::string("read --bench div0.txt --actions down,vectorize --quiet ") + how);
        EXPECT_EQ(r.exit_code, 0) << how << r.out << r.err;
        EXPECT_NE(r.out.find("matches the reference on all 128 output elements"), std::string::npos)
            << r.out;
    }
}

TEST(CliVerify, TheIssuesLongReductionIsSampledAndPasses) {
    // 64x64x8192 failed in the interpreter with the fixed relative tolerance of 1e-4; its
    // reference (33.6 M terms) is just above the full-reference budget, so it is sampled.
    TempDir dir("cli_verify_long");
    write_matmul(dir, "mm.txt", 64, 64, 8192);
    auto r = run_cli(dir, "read --bench mm.txt --no-measure --quiet --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\"verified\": true"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"output_elements\": 4096"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"checked_elements\": 4095"), std::string::npos) << r.out;
}

TEST(CliVerify, ANulByteInAFileShowsEscapedInTheError) {
    TempDir dir("cli_verify_nul");
    tests::write(dir, "nul.txt", std::string("looptool-program 1\nname x\nbo\0gus word\n", 38));
    auto r = run_cli(dir, "read --bench nul.txt --no-measure");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("'bo\\x00gus'"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\0'), std::string::npos);
}

std::string softmax_text(const std::string &name, const std::string &exp_arg) {
    return "looptool-program 1\nname " + name +
           "\nvar i 1000\nvar j 256\ntensor X input 1000 256\ntensor Mx temp 1000\n"
           "tensor E temp 1000 256\ntensor S temp 1000\ntensor Y output 1000 256\n"
           "stmt Mx[i] = max(Mx[i], X[i, j])\nstmt E[i, j] = exp(" +
           exp_arg +
           ")\nstmt S[i] += E[i, j]\nstmt Y[i, j] = E[i, j] / S[i]\n"
           "nest 0\nloop i 1000 0\nloop j 256 0\nnest 1\nloop i 1000 0\nloop j 256 0\n"
           "nest 2\nloop i 1000 0\nloop j 256 0\nnest 3\nloop i 1000 0\nloop j 256 0\n"
           "cursor 0\n";
}

// The softmax of the report: its max used to be summed by the reference, its divisor then
// underflowed in float, and `read` printed "verified ... 256000 not bounded" with exit 0. The
// max is a max now (checked exactly), so every element is bounded and checked.
TEST(CliVerify, TheSafeSoftmaxIsCheckedOnEveryElement) {
    TempDir dir("cli_verify_softmax");
    tests::write(dir, "sm.txt", softmax_text("sm", "X[i, j] - Mx[i]"));
    setenv("MAX_GFLOPS", "100", 1);
    auto r = run_cli(dir, "read --bench sm.txt --quiet --actions down,split_8,down,vectorize");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("verified (interpreter and JIT kernel): matches the reference on all "
                         "256000 output elements"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("not bounded"), std::string::npos) << r.out;
}

// Elements without a finite bound fail, with the reason, in every output form.
TEST(CliVerify, UncheckableElementsFailInsteadOfPassing) {
    TempDir dir("cli_verify_unbounded");
    // exp(100 * x) overflows float for x > 0.887: its sum and the quotient have no bound.
    tests::write(dir, "ovf.txt", softmax_text("ovf", "X[i, j] * 100"));
    // A division by a sum of products with zero: an inexact zero.
    tests::write(dir, "divz.txt", R"(looptool-program 1
name divz
var i 4
var j 8
tensor X input 4 8
tensor Z temp 4
tensor Y output 4 8
stmt Z[i] += X[i, j] * 0
stmt Y[i, j] = X[i, j] / Z[i]
nest 0
loop i 4 0
loop j 8 0
nest 1
loop i 4 0
loop j 8 0
cursor 0
)");
    setenv("MAX_GFLOPS", "100", 1);
    for (const char *bench : {"ovf.txt", "divz.txt"}) {
        for (const char *how : {"--no-measure", ""}) {
            auto r = run_cli(dir, std::string("read --quiet --bench ") + bench + " " + how);
            EXPECT_EQ(r.exit_code, 2) << bench << how << r.out << r.err;
            EXPECT_EQ(r.out.find("verified"), std::string::npos) << r.out;
            EXPECT_NE(r.out.find("MISMATCH"), std::string::npos) << r.out;
            EXPECT_NE(r.out.find("cannot be checked (no finite error bound)"), std::string::npos)
                << r.out;
            r = run_cli(dir, std::string("read --json --bench ") + bench + " " + how);
            EXPECT_EQ(r.exit_code, 2) << r.err;
            EXPECT_NE(r.out.find("\"verified\": false"), std::string::npos) << r.out;
        }
    }
    auto r = run_cli(dir, "search --bench divz.txt --algo greedy1 --budget-s 1");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.out.find("verified"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("cannot be checked"), std::string::npos) << r.err;
}

// The programs of datasets/normalization verify through `read`, interpreter and JIT kernel.
TEST(CliVerify, TheNormalizationDatasetVerifies) {
    TempDir dir("cli_verify_norm");
    setenv("MAX_GFLOPS", "100", 1);
    for (const char *name : {"softmax1536_128", "layernorm128_768"}) {
        const std::string path = std::string(LOOPTUNE_DATASETS_DIR) + "/normalization/" + name;
        auto r =
            run_cli(dir, "read --quiet --bench " + path + " --actions down,split_8,down,vectorize");
        EXPECT_EQ(r.exit_code, 0) << name << r.out << r.err;
        EXPECT_NE(r.out.find("verified (interpreter and JIT kernel): matches the reference on all"),
                  std::string::npos)
            << r.out;
    }
}

}  // namespace
}  // namespace looptool
