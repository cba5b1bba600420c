// looptool/jit/export.h: the exported object linked into a C program by `cc`, its numerics
// against the reference interpreter, its undefined symbols, and the files it writes.
#include "looptool/jit/export.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <sstream>

#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"
#include "looptool/lower/lower.h"
#include "search/tile_schedules.h"
#include "test_util.h"

namespace looptool {
namespace {

using tests::TempDir;

int sh(const std::string &cmd) {
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void write_floats(const std::string &path, const TensorData &d) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char *>(d.data()), std::streamsize(d.size() * 4));
}

/// A C driver that reads each input from IN_<name>.bin, calls the kernel, and writes each
/// output to OUT_<name>.bin: written from the header's contract (inputs, then outputs).
std::string c_driver(const Computation &c, const std::string &fn) {
    std::string decls, args, reads, writes;
    for (TensorKind kind : {TensorKind::Input, TensorKind::Output})
        for (const Tensor &t : c.tensors) {
            if (t.kind != kind) continue;
            const int64_t n = t.num_elements();
            decls += fmt::format("    float *{0} = aligned_alloc(64, ({1} * 4 + 63) / 64 * 64);\n",
                                 t.name, n);
            args += fmt::format("{}{}", args.empty() ? "" : ", ", t.name);
            if (kind == TensorKind::Input)
                reads += fmt::format("    if (!io(\"IN_{0}.bin\", \"rb\", {0}, {1})) return 2;\n",
                                     t.name, n);
            else {
                // Garbage in the outputs first: the kernel must overwrite them.
                reads +=
                    fmt::format("    for (long i = 0; i < {1}; ++i) {0}[i] = 1e30f;\n", t.name, n);
                writes += fmt::format("    if (!io(\"OUT_{0}.bin\", \"wb\", {0}, {1})) return 3;\n",
                                      t.name, n);
            }
        }
    return fmt::format(R"(#include <stdio.h>
#include <stdlib.h>
#include "{0}.h"
static int io(const char *path, const char *mode, float *p, long n) {{
    FILE *f = fopen(path, mode);
    if (!f) return 0;
    long done = mode[0] == 'r' ? (long)fread(p, 4, n, f) : (long)fwrite(p, 4, n, f);
    fclose(f);
    return done == n;
}}
/* The threads the process has after the call: a parallel kernel's workers stay. */
static void count_threads(void) {{
    char line[256];
    FILE *in = fopen("/proc/self/status", "r"), *out = fopen("threads.txt", "w");
    while (in && out && fgets(line, sizeof line, in))
        if (line[0] == 'T' && line[1] == 'h' && line[2] == 'r') fputs(line, out);
    if (in) fclose(in);
    if (out) fclose(out);
}}
int main(void) {{
{1}{2}    {0}({3});
    count_threads();
{4}    return 0;
}}
)",
                       fn, decls, reads, args, writes);
}

/// Exports p into dir, builds a C program against it with cc, runs it on the inputs of
/// make_buffers(seed 7) and compares its outputs with the reference interpreter.
Comparison run_exported_from_c(const Program &p, const TempDir &dir,
                               const ExportOptions &opts = {}) {
    const Computation &c = p.computation();
    const ExportedKernel k = export_kernel(p, opts);
    write_exported_kernel(k, dir.path.string());
    Buffers want = make_buffers(c, 7);
    for (size_t t = 0; t < c.tensors.size(); ++t)
        if (c.tensors[t].kind == TensorKind::Input)
            write_floats(dir / ("IN_" + c.tensors[t].name + ".bin"), want.data[t]);
    const Reference ref = compute_reference(c, want);
    tests::write(dir, "main.c", c_driver(c, k.name));
    const std::string d = dir.path.string();
    // A parallel kernel links the pthreads runtime written beside it.
    const std::string runtime = k.runtime.empty() ? "" : "looptool_threads.c -pthread";
    EXPECT_EQ(sh(fmt::format(
                  "cd '{0}' && cc -std=c11 -O2 -Wall -Werror -o prog main.c {1}.o {2} -lmvec -lm",
                  d, k.name, runtime)),
              0);
    EXPECT_EQ(sh(fmt::format("cd '{}' && ./prog", d)), 0);
    Buffers got = make_buffers(c, 7);
    for (size_t t = 0; t < c.tensors.size(); ++t)
        if (c.tensors[t].kind == TensorKind::Output) {
            const std::string bytes =
                tests::slurp(dir.path / ("OUT_" + c.tensors[t].name + ".bin"));
            EXPECT_EQ(bytes.size(), got.data[t].size() * 4) << c.tensors[t].name;
            std::memcpy(got.data[t].data(), bytes.data(),
                        std::min(bytes.size(), got.data[t].size() * 4));
        }
    return compare_outputs(c, ref, got);
}

Program with_actions(Program p, const std::string &actions) {
    for (Action a : parse_action_list(actions)) p = apply(p, a);
    return p;
}

TEST(Export, ATunedMatmulLinkedIntoACProgramMatchesTheReference) {
    TempDir dir("export_c");
    // An 8x16 register tile (m_i unrolled, n_i vectorized) with tails in m and n.
    const Program p = with_actions(
        tests::matmul_program(37, 100, 129),
        "split_8,down,down,down,split_16,swap_up,swap_up,down,swap_down,unroll,down,vectorize");
    ASSERT_TRUE(verify_schedule(p).ok);
    const Comparison r = run_exported_from_c(p, dir);
    EXPECT_TRUE(r.ok) << r.first_mismatch;
}

TEST(Export, TemporariesTheLoweringKeepsAreAllocatedInsideTheKernel) {
    TempDir dir("export_temp");
    // Without copy elision matmul's T is a real buffer the C caller never sees.
    ExportOptions opts;
    opts.lower.elide_copies = false;
    const Program p =
        with_actions(tests::matmul_program(17, 31, 8), "split_4,down,down,down,vectorize");
    const Comparison r = run_exported_from_c(p, dir, opts);
    EXPECT_TRUE(r.ok) << r.first_mismatch;
    const std::string ir = tests::slurp(dir.path / "mm17_31_8.ll");
    EXPECT_NE(ir.find("@aligned_alloc"), std::string::npos);
}

TEST(Export, AConvolutionLinkedIntoACProgramMatchesTheReference) {
    TempDir dir("export_conv");
    std::mt19937_64 rng(16);
    const Program p = tests::random_walk(
        Program::naive(std::make_shared<Computation>(make_conv2d(1, 3, 9, 11, 4, 3, 3, "conv"))),
        rng, 12);
    ASSERT_TRUE(verify_schedule(p).ok);
    const Comparison r = run_exported_from_c(p, dir);
    EXPECT_TRUE(r.ok) << r.first_mismatch;
}

// A conv tile with its weights packed calls the register transpose (lower_runtime.h): the
// exported object carries its own copy, so a C program links it with nothing else.
TEST(Export, APackedConvolutionCarriesItsTransposeAndMatchesTheReference) {
    TempDir dir("export_pack");
    auto conv = std::make_shared<Computation>(make_conv2d(1, 32, 6, 12, 64, 3, 3, "conv_pack"));
    Program p = Program::naive(conv);
    for (Action a : looptune::conv_tile_actions(
             *conv, looptune::ConvTileSchedule{32, 8, "mh", false, true, true}))
        p = apply(p, a);
    ASSERT_TRUE(verify_schedule(p).ok);
    ASSERT_EQ(lower_to_llvm_ir(p).summary.transposed_copies, 1) << dump(p);
    const Comparison r = run_exported_from_c(p, dir);
    EXPECT_TRUE(r.ok) << r.first_mismatch;
    ASSERT_EQ(sh(fmt::format("nm -u '{}' > '{}'", dir / "conv_pack.o", dir / "undefined.txt")), 0);
    EXPECT_EQ(tests::slurp(dir.path / "undefined.txt").find("looptool_transpose16"),
              std::string::npos);
}

/// p with the outermost loop of each nest made parallel where the rule allows it.
Program parallel_nests(Program p) {
    for (int n = 0; n < int(p.tree.nests.size()); ++n) {
        p.cursor = p.tree.flat({n, 0});
        if (!why_illegal(p, Action::Parallel)) p = apply(p, Action::Parallel);
    }
    return p;
}

int threads_of_driver(const TempDir &dir) {
    const std::string status = tests::slurp(dir.path / "threads.txt");  // "Threads:\tN"
    return status.rfind("Threads:", 0) == 0 ? std::atoi(status.c_str() + 8) : -1;
}

// A parallel kernel runs from a C program on the threads it was exported with: its object
// calls looptool_parallel_for, which looptool_threads.c (pthreads) defines.
TEST(Export, AParallelMatmulRunsFromACProgramOnItsThreads) {
    // An 8x16 tile over 37 rows (5 tile rows: an uneven split on 3 threads, a tail), both nests
    // parallel.
    const Program p = parallel_nests(with_actions(
        tests::matmul_program(37, 100, 129),
        "split_8,down,down,down,split_16,swap_up,swap_up,down,swap_down,unroll,down,vectorize"));
    ASSERT_TRUE(p.tree.nests[0].loops[0].parallel) << dump(p);
    for (int threads : {2, 3}) {
        SCOPED_TRACE(fmt::format("{} threads", threads));
        TempDir dir("export_parallel");
        ExportOptions opts;
        opts.lower.threads = threads;
        const ExportedKernel k = export_kernel(p, opts);
        EXPECT_EQ(k.threads, threads);
        EXPECT_NE(k.header.find("looptool_threads.c"), std::string::npos) << k.header;
        const Comparison r = run_exported_from_c(p, dir, opts);
        EXPECT_TRUE(r.ok) << r.first_mismatch;
        EXPECT_EQ(threads_of_driver(dir), threads);  // the caller and threads - 1 workers
        ASSERT_EQ(sh(fmt::format("nm -u '{}' > '{}'", dir / "mm37_100_129.o", dir / "u.txt")), 0);
        EXPECT_NE(tests::slurp(dir.path / "u.txt").find("looptool_parallel_for"),
                  std::string::npos);
    }
}

TEST(Export, AParallelConvolutionRunsFromACProgram) {
    TempDir dir("export_parallel_conv");
    const Program p = parallel_nests(
        Program::naive(std::make_shared<Computation>(make_conv2d(3, 4, 7, 6, 5, 3, 2, "pconv"))));
    ExportOptions opts;
    opts.lower.threads = 2;
    const Comparison r = run_exported_from_c(p, dir, opts);
    EXPECT_TRUE(r.ok) << r.first_mismatch;
    EXPECT_EQ(threads_of_driver(dir), 2);
}

// Without a parallel loop (or with one thread) the kernel is the single-threaded one: no
// runtime file, nothing but libc.
TEST(Export, ThreadsWithoutAParallelLoopWriteNoRuntime) {
    TempDir dir("export_serial");
    ExportOptions opts;
    opts.lower.threads = 4;
    const ExportedKernel k = export_kernel(tests::matmul_program(16, 16, 16), opts);
    EXPECT_EQ(k.threads, 1);
    EXPECT_TRUE(k.runtime.empty());
    const std::vector<std::string> files = write_exported_kernel(k, dir.path.string());
    EXPECT_EQ(files.size(), 5u);
    ExportOptions one;
    const ExportedKernel serial =
        export_kernel(parallel_nests(tests::matmul_program(16, 16, 16)), one);
    EXPECT_TRUE(serial.runtime.empty());
    EXPECT_EQ(serial.ir.find("looptool_parallel_for"), std::string::npos);
}

// erf on vectors calls libmvec (lower_math.h): the object names it, the header says to link
// it, and a C program linked with -lmvec -lm matches the reference.
TEST(Export, AGeluOnVectorsLinksLibmvecAndMatchesTheReference) {
    TempDir dir("export_gelu");
    const Program p =
        with_actions(Program::naive(std::make_shared<Computation>(make_gelu(7, 45, false, "gelu"))),
                     "down, split_16, down, vectorize");
    const Comparison r = run_exported_from_c(p, dir);
    EXPECT_TRUE(r.ok) << r.first_mismatch;
    EXPECT_NE(tests::slurp(dir.path / "gelu.h").find("-lmvec"), std::string::npos);
    ASSERT_EQ(sh(fmt::format("nm -u '{}' > '{}'", dir / "gelu.o", dir / "undefined.txt")), 0);
    EXPECT_NE(tests::slurp(dir.path / "undefined.txt").find("_ZGV"), std::string::npos);
    // A softmax's exp on vectors is inline code: it matches and calls no libmvec.
    TempDir dir2("export_softmax");
    const Program s =
        with_actions(Program::naive(std::make_shared<Computation>(make_softmax(7, 45, "softmax"))),
                     "down, down, down, split_16, down, vectorize");
    const Comparison rs = run_exported_from_c(s, dir2);
    EXPECT_TRUE(rs.ok) << rs.first_mismatch;
    ASSERT_EQ(sh(fmt::format("nm -u '{}' > '{}'", dir2 / "softmax.o", dir2 / "undefined.txt")), 0);
    EXPECT_EQ(tests::slurp(dir2.path / "undefined.txt").find("_ZGV"), std::string::npos);
    // A matmul calls none: its header names libc only.
    EXPECT_EQ(export_kernel(tests::matmul_program(8, 8, 8)).header.find("mvec"), std::string::npos);
}

TEST(Export, TheObjectNeedsNothingBeyondLibcAndLibm) {
    TempDir dir("export_nm");
    ExportOptions opts;
    opts.lower.elide_copies = false;  // the allocating variant, the one with the most calls
    const Program p = with_actions(tests::matmul_program(64, 64, 64), "split_8,down,unroll");
    write_exported_kernel(export_kernel(p, opts), dir.path.string());
    ASSERT_EQ(sh(fmt::format("nm -u '{}' > '{}'", dir / "mm64_64_64.o", dir / "undefined.txt")), 0);
    const std::set<std::string> libc{"memset", "memcpy", "memmove", "aligned_alloc",
                                     "free",   "abort",  "expf",    "logf",
                                     "sqrtf",  "fabsf",  "fminf",   "fmaxf"};
    std::istringstream in(tests::slurp(dir.path / "undefined.txt"));
    std::string kind, sym;
    int n = 0;
    while (in >> kind >> sym) {
        ++n;
        EXPECT_TRUE(libc.count(sym)) << "undefined symbol " << sym;
    }
    EXPECT_GT(n, 0);  // aligned_alloc and free at least: the check above did run
}

TEST(Export, TheHeaderDeclaresInputsThenOutputsAndTheShapes) {
    const ExportedKernel k = export_kernel(tests::matmul_program(12, 20, 8));
    EXPECT_EQ(k.name, "mm12_20_8");
    EXPECT_NE(k.header.find("void mm12_20_8(const float *A, const float *B, float *C);"),
              std::string::npos)
        << k.header;
    EXPECT_NE(k.header.find("float[12][8]"), std::string::npos) << k.header;
    EXPECT_EQ(k.header.find("float *T"), std::string::npos) << "temporaries are not exposed";
    EXPECT_EQ(k.object.substr(0, 4),
              "\x7f"
              "ELF");
}

TEST(Export, TheProgramFileRoundTripsToTheSameSchedule) {
    TempDir dir("export_program");
    const Program p =
        with_actions(tests::matmul_program(40, 24, 16), "split_8,down,down,down,vectorize");
    write_exported_kernel(export_kernel(p), dir.path.string());
    const Program back = load_program_file(dir / "mm40_24_16.program");
    EXPECT_TRUE(back.same_as(p));
    EXPECT_EQ(schedule_key(back), schedule_key(p));
}

TEST(Export, AnotherCpuIsHonouredAndAnUnknownOneIsAnError) {
    ExportOptions opts;
    opts.cpu = "x86-64-v2";  // SSE4.2: no AVX, so no ymm or zmm registers
    const ExportedKernel k =
        export_kernel(with_actions(tests::matmul_program(32, 32, 32), "down,down,vectorize"), opts);
    EXPECT_EQ(k.cpu, "x86-64-v2");
    EXPECT_NE(k.assembly.find("xmm"), std::string::npos);
    EXPECT_EQ(k.assembly.find("ymm"), std::string::npos);
    EXPECT_EQ(k.assembly.find("zmm"), std::string::npos);
    opts.cpu = "pentium-9000";
    try {
        export_kernel(tests::matmul_program(8, 8, 8), opts);
        ADD_FAILURE() << "no error for an unknown CPU";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("pentium-9000"), std::string::npos) << e.what();
    }
}

TEST(Export, AFunctionNameThatIsNoCIdentifierIsAnError) {
    ExportOptions opts;
    opts.name = "my kernel";
    EXPECT_THROW(export_kernel(tests::matmul_program(8, 8, 8), opts), Error);
    EXPECT_EQ(c_identifier("mm-8.x"), "mm_8_x");
    EXPECT_EQ(c_identifier("3mm"), "_3mm");
}

// A keyword breaks the header; a libc name clashes with (or shadows) the function the kernel
// and its caller link against; C reserves __x and _X.
TEST(Export, AKeywordOrALibcNameIsRefusedAsTheFunctionName) {
    for (const char *name : {"int", "while", "class", "memset", "free", "aligned_alloc", "expf",
                             "main", "__kernel", "_Kernel"}) {
        ExportOptions opts;
        opts.name = name;
        try {
            export_kernel(tests::matmul_program(8, 8, 8), opts);
            ADD_FAILURE() << name << " accepted";
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find(std::string("'") + name + "' is"),
                      std::string::npos)
                << e.what();
        }
    }
    ExportOptions ok;
    ok.name = "_kernel_memset";
    EXPECT_EQ(export_kernel(tests::matmul_program(8, 8, 8), ok).name, "_kernel_memset");
}

// The temporaries are new files: a symlink planted at the name the writer used to pick
// (NAME.ext.tmpPID) is neither followed nor truncated.
TEST(Export, APlantedSymlinkAtATemporaryNameIsNotFollowed) {
    TempDir dir("export_link");
    tests::write(dir, "victim", "keep me");
    for (const char *ext : {".o", ".h", ".ll", ".s", ".program"})
        std::filesystem::create_symlink(
            dir.path / "victim",
            dir.path / ("mm8_8_8" + std::string(ext) + ".tmp" + std::to_string(::getpid())));
    write_exported_kernel(export_kernel(tests::matmul_program(8, 8, 8)), dir.path.string());
    EXPECT_EQ(tests::slurp(dir.path / "victim"), "keep me");
    EXPECT_GT(std::filesystem::file_size(dir.path / "mm8_8_8.o"), 0u);
}

// All or nothing: a directory where one of the five files goes stops the export before any
// file is renamed into place.
TEST(Export, ADirectoryInTheWayLeavesNoNewFileBehind) {
    TempDir dir("export_dir");
    std::filesystem::create_directories(dir.path / "mm8_8_8.ll");
    try {
        write_exported_kernel(export_kernel(tests::matmul_program(8, 8, 8)), dir.path.string());
        ADD_FAILURE() << "exported over a directory";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("mm8_8_8.ll: is a directory"), std::string::npos)
            << e.what();
    }
    std::vector<std::string> left;
    for (const auto &e : std::filesystem::directory_iterator(dir.path))
        left.push_back(e.path().filename().string());
    EXPECT_EQ(left, std::vector<std::string>{"mm8_8_8.ll"});
}

TEST(Export, AnUnwritableDirectoryIsAnErrorAndLeavesNoFiles) {
    TempDir dir("export_ro");
    tests::write(dir, "file", "not a directory");
    EXPECT_THROW(write_exported_kernel(export_kernel(tests::matmul_program(8, 8, 8)), dir / "file"),
                 Error);
    if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
    std::filesystem::create_directories(dir.path / "ro");
    std::filesystem::permissions(
        dir.path / "ro", std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    EXPECT_THROW(write_exported_kernel(export_kernel(tests::matmul_program(8, 8, 8)), dir / "ro"),
                 Error);
    EXPECT_TRUE(std::filesystem::is_empty(dir.path / "ro"));
}

}  // namespace
}  // namespace looptool
