// lib/kernel_library.h: a library built from a few tuned entries, loaded with dlopen and linked
// statically into a C program; every kernel, the dispatch on tuned and unseen shapes (0 and 1
// sizes, primes, larger than any tuned one), misaligned pointers and bad arguments, checked
// against the reference interpreter; errors leave no file behind.
#include "lib/kernel_library.h"
#include "lib/dispatch_source.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "looptool/actions/actions.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "looptool/jit/export.h"
#include "search/tile_schedules.h"
#include "test_util.h"

namespace looptune {
namespace {

using looptool::Buffers;
using looptool::Computation;
using looptool::Program;
using looptool::tests::TempDir;
namespace tests = looptool::tests;

using SgemmFn = int (*)(int64_t, int64_t, int64_t, const float *, const float *, float *);
using ConvFn = int (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const float *,
                       const float *, float *);
using ConvExFn = int (*)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, const float *, const float *, float *);
using KernelFn3 = void (*)(const float *, const float *, float *);

LibraryEntry entry(const Program &p, const std::string &kind, std::vector<int64_t> shape) {
    LibraryEntry e;
    e.machine = "test-machine";
    e.computation = p.computation().name;
    e.name = p.computation().name;
    e.kind = kind;
    e.shape = std::move(shape);
    e.program = looptool::serialize(p);
    e.gflops = 1;
    e.verified = looptool::verify_schedule(p).ok;
    return e;
}

/// A tiled and a naive matmul, an odd-shaped one, a tiled conv, a naive conv and a tiled padded
/// conv of stride 2.
std::vector<LibraryEntry> test_entries() {
    std::vector<LibraryEntry> out;
    auto mm = std::make_shared<Computation>(looptool::make_matmul(64, 64, 64, "mm64_64_64"));
    Program p = Program::naive(mm);
    for (looptool::Action a : tile_actions(*mm, TileSchedule{})) p = looptool::apply(p, a);
    out.push_back(entry(p, "matmul", {64, 64, 64}));
    auto odd = std::make_shared<Computation>(looptool::make_matmul(17, 33, 40, "mm17_33_40"));
    out.push_back(entry(Program::naive(odd), "matmul", {17, 33, 40}));
    auto cv = std::make_shared<Computation>(looptool::make_conv2d(1, 8, 10, 36, 16, 3, 3, "convA"));
    Program pc = Program::naive(cv);
    for (looptool::Action a : conv_tile_actions(*cv, ConvTileSchedule{8, 32, "mh"}))
        pc = looptool::apply(pc, a);
    out.push_back(entry(pc, "conv2d", {1, 8, 10, 36, 16, 3, 3}));
    auto cv2 = std::make_shared<Computation>(looptool::make_conv2d(2, 3, 7, 9, 5, 2, 4, "convB"));
    out.push_back(entry(Program::naive(cv2), "conv2d", {2, 3, 7, 9, 5, 2, 4}));
    auto cv3 = std::make_shared<Computation>(
        looptool::make_padded_conv2d(1, 4, 9, 20, 16, 3, 3, 2, 1, "convC"));
    Program p3 = Program::naive(cv3);
    for (looptool::Action a : conv_tile_actions(*cv3, ConvTileSchedule{8, 16, "hm"}))
        p3 = looptool::apply(p3, a);
    out.push_back(entry(p3, "conv2d", {1, 4, 9, 20, 16, 3, 3, 2, 1}));
    return out;
}

class KernelLibraryTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir("kernel_library");
        KernelLibraryOptions o;
        o.out = dir_->path.string();
        o.machine = "test-machine";
        o.block = {16, 32, 64};
        lib_ = new KernelLibrary(build_kernel_library(test_entries(), o));
        handle_ = dlopen((*dir_ / "liblooptune_kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
        ASSERT_TRUE(handle_) << dlerror();
        sgemm_ = reinterpret_cast<SgemmFn>(dlsym(handle_, "lt_sgemm"));
        conv_ = reinterpret_cast<ConvFn>(dlsym(handle_, "lt_sconv2d"));
        conv_ex_ = reinterpret_cast<ConvExFn>(dlsym(handle_, "lt_sconv2d_ex"));
    }
    static void TearDownTestSuite() {
        if (handle_) dlclose(handle_);
        delete lib_;
        delete dir_;
    }
    static TempDir *dir_;
    static KernelLibrary *lib_;
    static void *handle_;
    static SgemmFn sgemm_;
    static ConvFn conv_;
    static ConvExFn conv_ex_;
};
TempDir *KernelLibraryTest::dir_ = nullptr;
KernelLibrary *KernelLibraryTest::lib_ = nullptr;
void *KernelLibraryTest::handle_ = nullptr;
SgemmFn KernelLibraryTest::sgemm_ = nullptr;
ConvFn KernelLibraryTest::conv_ = nullptr;
ConvExFn KernelLibraryTest::conv_ex_ = nullptr;

/// Runs `call` on c's inputs (copied `offset` floats past a 64-byte boundary) into an output
/// at the same offset, checks the return code is 0 and compares with the reference.
template <typename Call>
looptool::Comparison run_checked(const Computation &c, int offset, Call call) {
    Buffers b = looptool::make_buffers(c, 7);
    const looptool::Reference want = looptool::compute_reference(c, b);
    std::vector<int> ids;  // inputs, then outputs
    for (looptool::TensorKind kind : {looptool::TensorKind::Input, looptool::TensorKind::Output})
        for (size_t t = 0; t < c.tensors.size(); ++t)
            if (c.tensors[t].kind == kind) ids.push_back(int(t));
    std::vector<looptool::TensorData> shifted;
    for (int t : ids) {
        const auto &src = b.data[size_t(t)];
        looptool::TensorData d(src.size() + size_t(offset), 1e30f);
        std::copy(src.begin(), src.end(), d.begin() + offset);
        shifted.push_back(std::move(d));
    }
    EXPECT_EQ(
        call(shifted[0].data() + offset, shifted[1].data() + offset, shifted[2].data() + offset),
        0);
    auto &out = b.data[size_t(ids[2])];
    std::copy(shifted[2].begin() + offset, shifted[2].end(), out.begin());
    return looptool::compare_outputs(c, want, b);
}

looptool::Comparison sgemm_checked(SgemmFn f, int64_t m, int64_t n, int64_t k, int offset = 0) {
    const Computation c = looptool::make_matmul(m, n, k, "check");
    return run_checked(c, offset, [&](const float *a, const float *b, float *out) {
        return f(m, n, k, a, b, out);
    });
}

TEST_F(KernelLibraryTest, WritesTheFourFilesAndNoStagingDirectory) {
    ASSERT_EQ(lib_->files.size(), 4u);
    for (const auto &f : lib_->files) EXPECT_TRUE(std::filesystem::exists(f)) << f;
    for (const auto &e : std::filesystem::directory_iterator(dir_->path))
        EXPECT_EQ(e.path().filename().string().rfind(".lt-build", 0), std::string::npos);
    EXPECT_EQ(lib_->block_source.rfind("seed ", 0), 0u) << lib_->block_source;
    EXPECT_TRUE(lib_->block.verified);
}

TEST_F(KernelLibraryTest, TunedShapesMatchTheReferenceAlignedOrNot) {
    for (int offset : {0, 1, 3})
        for (auto [m, n, k] : {std::tuple{64, 64, 64}, {17, 33, 40}}) {
            const auto r = sgemm_checked(sgemm_, m, n, k, offset);
            EXPECT_TRUE(r.ok) << m << "x" << n << "x" << k << " +" << offset << ": "
                              << r.first_mismatch;
        }
}

TEST_F(KernelLibraryTest, UnseenShapesGoThroughTheFallbacks) {
    // Both fallbacks: (1, 1, 1) and (1, 300, 70) pad too much for the 16x32x64 block (loops);
    // the others are tiled over it, edges included.
    const std::tuple<int, int, int> shapes[] = {{1, 1, 1},      {1, 300, 70},   {2, 3, 5},
                                                {13, 17, 19},   {16, 32, 64},   {64, 64, 65},
                                                {67, 131, 263}, {100, 37, 200}, {1, 1, 300}};
    for (auto [m, n, k] : shapes)
        for (int offset : {0, 1}) {
            const auto r = sgemm_checked(sgemm_, m, n, k, offset);
            EXPECT_TRUE(r.ok) << m << "x" << n << "x" << k << " +" << offset << ": "
                              << r.first_mismatch;
        }
}

TEST_F(KernelLibraryTest, ZeroSizesAndBadArguments) {
    std::vector<float> a(64, 1.f), b(64, 1.f), c(64, 5.f);
    EXPECT_EQ(sgemm_(0, 4, 4, nullptr, b.data(), nullptr), 0);
    EXPECT_EQ(sgemm_(4, 0, 4, a.data(), nullptr, nullptr), 0);
    EXPECT_EQ(sgemm_(0, 0, 0, nullptr, nullptr, nullptr), 0);
    EXPECT_EQ(sgemm_(3, 4, 0, nullptr, nullptr, c.data()), 0);  // K = 0: C = 0
    for (int i = 0; i < 12; ++i) EXPECT_EQ(c[size_t(i)], 0.f) << i;
    EXPECT_EQ(c[12], 5.f);  // nothing past C
    EXPECT_NE(sgemm_(-1, 4, 4, a.data(), b.data(), c.data()), 0);
    EXPECT_NE(sgemm_(4, 4, -2, a.data(), b.data(), c.data()), 0);
    EXPECT_NE(sgemm_(4, 4, 4, nullptr, b.data(), c.data()), 0);
    EXPECT_NE(sgemm_(4, 4, 4, a.data(), nullptr, c.data()), 0);
    EXPECT_NE(sgemm_(4, 4, 4, a.data(), b.data(), nullptr), 0);
    EXPECT_NE(sgemm_(4, 4, 4, a.data(), b.data(), a.data() + 2), 0);  // C overlaps A
    EXPECT_NE(sgemm_(int64_t(1) << 40, int64_t(1) << 40, 2, a.data(), b.data(), c.data()), 0);
    EXPECT_NE(sgemm_(INT64_MAX, 1, 1, a.data(), b.data(), c.data()), 0);
    EXPECT_NE(conv_(1, 1, 2, 2, 1, 3, 1, a.data(), b.data(), c.data()), 0);  // KH > H
    EXPECT_NE(conv_(1, 1, 2, 2, 1, 0, 1, a.data(), b.data(), c.data()), 0);
    EXPECT_NE(conv_(-1, 1, 2, 2, 1, 1, 1, a.data(), b.data(), c.data()), 0);
    EXPECT_EQ(conv_(0, 1, 2, 2, 1, 1, 1, nullptr, b.data(), nullptr), 0);
}

TEST_F(KernelLibraryTest, ConvTunedAndUnseenShapes) {
    const std::array<int64_t, 7> shapes[] = {{1, 8, 10, 36, 16, 3, 3},
                                             {2, 3, 7, 9, 5, 2, 4},
                                             {1, 1, 1, 1, 1, 1, 1},
                                             {3, 5, 11, 13, 7, 3, 2},
                                             {1, 16, 9, 40, 33, 1, 1}};
    for (const auto &s : shapes)
        for (int offset : {0, 1}) {
            const Computation c = looptool::make_conv2d(s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
            const auto r = run_checked(c, offset, [&](const float *x, const float *w, float *y) {
                return conv_(s[0], s[1], s[2], s[3], s[4], s[5], s[6], x, w, y);
            });
            EXPECT_TRUE(r.ok) << c.name << " +" << offset << ": " << r.first_mismatch;
        }
}

// Strides and padding: the tuned padded kernel by its shape, others through im2col (the zeros
// around the image included), each against make_padded_conv2d's reference.
TEST_F(KernelLibraryTest, StridedAndPaddedConvs) {
    ASSERT_TRUE(conv_ex_);
    const std::array<int64_t, 9> shapes[] = {{1, 4, 9, 20, 16, 3, 3, 2, 1},
                                             {2, 3, 7, 9, 5, 3, 3, 1, 1},
                                             {1, 5, 11, 8, 7, 3, 3, 2, 2},
                                             {1, 2, 5, 6, 3, 5, 3, 3, 1},
                                             {2, 3, 7, 9, 5, 2, 4, 1, 0}};
    for (const auto &s : shapes)
        for (int offset : {0, 1}) {
            const Computation c =
                looptool::make_padded_conv2d(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8]);
            const auto r = run_checked(c, offset, [&](const float *x, const float *w, float *y) {
                return conv_ex_(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], x, w, y);
            });
            EXPECT_TRUE(r.ok) << c.name << " +" << offset << ": " << r.first_mismatch;
        }
    std::vector<float> a(64, 1.0f), b(64, 1.0f), c(256, 0.0f);
    EXPECT_NE(conv_ex_(1, 1, 2, 2, 1, 3, 3, 0, 1, a.data(), b.data(), c.data()), 0);  // stride
    EXPECT_NE(conv_ex_(1, 1, 2, 2, 1, 3, 3, 1, -1, a.data(), b.data(), c.data()), 0);
    EXPECT_NE(conv_ex_(1, 1, 2, 2, 1, 5, 5, 1, 1, a.data(), b.data(), c.data()), 0);  // KH > H+2P
    EXPECT_NE(conv_ex_(1, 1, 2, 2, 1, 3, 3, 1, int64_t(1) << 62, a.data(), b.data(), c.data()), 0);
    // A 2x2 image of ones, 3x3 kernel of ones, padding 1: every output sees all four pixels.
    ASSERT_EQ(conv_ex_(1, 1, 2, 2, 1, 3, 3, 1, 1, a.data(), b.data(), c.data()), 0);
    EXPECT_EQ(std::vector<float>(c.begin(), c.begin() + 4), std::vector<float>(4, 4.0f));
}

// Each kernel called directly (no dispatch, so no copy) on pointers 4, 8, 12 and 16 bytes past
// a 64-byte boundary: the library lowers for any 4-byte aligned pointer; its _a64 variant on
// 64-byte aligned ones.
TEST_F(KernelLibraryTest, EachKernelUnderItsOwnNameAndTheManifest) {
    ASSERT_EQ(lib_->kernels.size(), 5u);
    for (const LibraryKernel &k : lib_->kernels) {
        auto fn = reinterpret_cast<KernelFn3>(dlsym(handle_, k.function.c_str()));
        ASSERT_TRUE(fn) << k.function;
        const Program p = looptool::parse_program(k.entry.program);
        for (int offset : {0, 1, 2, 3, 4}) {
            const auto r =
                run_checked(p.computation(), offset, [&](const float *a, const float *b, float *c) {
                    fn(a, b, c);
                    return 0;
                });
            EXPECT_TRUE(r.ok) << k.function << " +" << offset << ": " << r.first_mismatch;
        }
        // Its variant for 64-byte aligned pointers, which the dispatch calls on such pointers.
        const std::string a64 = aligned_function_name(k.function);
        auto fn64 = reinterpret_cast<KernelFn3>(dlsym(handle_, a64.c_str()));
        ASSERT_TRUE(fn64) << a64;
        const auto r =
            run_checked(p.computation(), 0, [&](const float *a, const float *b, float *c) {
                fn64(a, b, c);
                return 0;
            });
        EXPECT_TRUE(r.ok) << a64 << ": " << r.first_mismatch;
    }
    auto info = reinterpret_cast<const char *(*)()>(dlsym(handle_, "lt_library_info"));
    ASSERT_TRUE(info);
    const auto j = nlohmann::json::parse(info());
    EXPECT_EQ(j, nlohmann::json::parse(tests::slurp(dir_->path / "looptune_kernels.json")));
    EXPECT_EQ(j["machine"], "test-machine");
    EXPECT_EQ(j["alignment"], 4);
    ASSERT_EQ(j["kernels"].size(), 5u);
    EXPECT_EQ(j["kernels"][4]["shape"], nlohmann::json({1, 4, 9, 20, 16, 3, 3, 2, 1}));
    EXPECT_EQ(j["kernels"][0]["function"], "lt_mm64_64_64");
    EXPECT_EQ(j["kernels"][0]["kind"], "matmul");
    EXPECT_EQ(j["kernels"][0]["shape"], nlohmann::json({64, 64, 64}));
    EXPECT_EQ(j["kernels"][0]["verified"], true);
    EXPECT_EQ(j["block"]["shape"], nlohmann::json({16, 32, 64}));
}

// The static library and the header, as a C program uses them.
TEST_F(KernelLibraryTest, AStaticCProgramLinksAndComputes) {
    TempDir work("kernel_library_c");
    tests::write(work, "main.c", R"(#include <stdio.h>
#include "looptune_kernels.h"
int main(void) {
    float a[3 * 7], b[7 * 5], c[3 * 5];
    for (int i = 0; i < 21; ++i) a[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < 35; ++i) b[i] = (float)(i % 3) * 0.5f;
    if (lt_sgemm(3, 5, 7, a, b, c) != LT_OK) return 2;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 5; ++j) {
            float s = 0;
            for (int k = 0; k < 7; ++k) s += a[i * 7 + k] * b[k * 5 + j];
            if (s != c[i * 5 + j]) return 3;
        }
    return lt_sgemm(-1, 5, 7, a, b, c) == LT_EINVAL ? 0 : 4;
}
)");
    const std::string cmd = fmt::format(
        "cc -std=c11 -O2 -I '{0}' '{1}' '{0}/liblooptune_kernels.a' -lm -o '{2}' && '{2}'",
        dir_->path.string(), work / "main.c", work / "prog");
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    // The header is C++ too (extern "C"), against the shared library this time.
    const std::string cxx = fmt::format(
        "c++ -x c++ -O2 -I '{0}' '{1}' -x none -L '{0}' -llooptune_kernels -Wl,-rpath,'{0}' -o "
        "'{2}' && '{2}'",
        dir_->path.string(), work / "main.c", work / "prog_cxx");
    EXPECT_EQ(std::system(cxx.c_str()), 0) << cxx;
}

// What the .so defines for its users: the lt_ functions only (no clash with the program's).
TEST_F(KernelLibraryTest, TheSharedLibraryDefinesOnlyLtFunctions) {
    TempDir work("kernel_library_nm");
    const std::string cmd = fmt::format("nm -D --defined-only '{}' > '{}'",
                                        *dir_ / "liblooptune_kernels.so", work / "nm.txt");
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::istringstream in(tests::slurp(work.path / "nm.txt"));
    int lt = 0;
    for (std::string addr, type, name; in >> addr >> type >> name;) {
        if (name == "_init" || name == "_fini") continue;
        EXPECT_EQ(name.rfind("lt_", 0), 0u) << name;
        lt += name.rfind("lt_", 0) == 0;
    }
    // the kernels and their _a64 variants, the block kernel, lt_sgemm, lt_sconv2d(_ex),
    // lt_library_info
    EXPECT_EQ(lt, 2 * 5 + 1 + 4);
}

// With threads, a parallel kernel runs on the library's own pool (looptool_threads.c compiled
// in, its symbols hidden): lt_sgemm on the tuned shape matches the reference.
TEST(KernelLibrary, AParallelKernelRunsOnTheLibrarysOwnPool) {
    TempDir dir("kernel_library_threads");
    auto mm = std::make_shared<Computation>(looptool::make_matmul(64, 48, 40, "mm64_48_40"));
    Program p = Program::naive(mm);
    for (looptool::Action a : tile_actions(*mm, TileSchedule{})) p = looptool::apply(p, a);
    p.cursor = 0;
    p = looptool::apply(p, looptool::Action::Parallel);
    KernelLibraryOptions o;
    o.out = dir.path.string();
    o.block = {64, 48, 40};  // the tuned entry: no seeds measured
    o.threads = 2;
    build_kernel_library({entry(p, "matmul", {64, 48, 40})}, o);
    void *h = dlopen((dir / "liblooptune_kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(h) << dlerror();
    auto sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "lt_sgemm"));
    ASSERT_TRUE(sgemm);
    EXPECT_EQ(dlsym(h, "looptool_parallel_for"), nullptr);  // hidden
    const looptool::Comparison r = sgemm_checked(sgemm, 64, 48, 40);
    EXPECT_TRUE(r.ok) << r.first_mismatch;
    // Not closed: the pool's workers wait in the library's code for the process's life.
    const std::string ir = looptool::export_kernel(p,
                                                   [] {
                                                       looptool::ExportOptions e;
                                                       e.lower.threads = 2;
                                                       return e;
                                                   }())
                               .ir;
    EXPECT_NE(ir.find("looptool_parallel_for"), std::string::npos);
}

TEST(KernelLibrary, ABlockOfATunedShapeComesFromTheLibrary) {
    std::string source;
    const auto entries = test_entries();
    const LibraryEntry b = block_kernel_entry(entries, {17, 33, 40}, source);
    EXPECT_EQ(source, "library");
    EXPECT_EQ(b.program, entries[1].program);
}

// --align 64: the JIT's lowering; lt_sgemm copies pointers that are not 64-byte aligned.
TEST(KernelLibrary, A64ByteAlignedLibraryCopiesOtherPointers) {
    TempDir dir("kernel_library_a64");
    KernelLibraryOptions o;
    o.out = dir.path.string();
    o.block = {64, 64, 64};  // the tuned entry: no seeds measured
    o.align = 64;
    build_kernel_library({test_entries()[0]}, o);
    const auto j = nlohmann::json::parse(tests::slurp(dir.path / "looptune_kernels.json"));
    EXPECT_EQ(j["alignment"], 64);
    EXPECT_NE(tests::slurp(dir.path / "looptune_kernels.h").find("64-byte aligned"),
              std::string::npos);
    void *h = dlopen((dir.path / "liblooptune_kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_TRUE(h) << dlerror();
    auto sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "lt_sgemm"));
    for (int offset : {0, 1, 4}) {
        const auto r = sgemm_checked(sgemm, 64, 64, 64, offset);
        EXPECT_TRUE(r.ok) << "+" << offset << ": " << r.first_mismatch;
    }
    dlclose(h);
    o.align = 8;
    EXPECT_THROW(build_kernel_library({test_entries()[0]}, o), looptool::Error);
}

TEST(KernelLibrary, ErrorsLeaveTheOldLibraryAndNoNewFile) {
    TempDir dir("kernel_library_err");
    KernelLibraryOptions o;
    o.out = dir / "out";
    o.block = {64, 64, 64};  // the tuned entry: no seeds measured
    try {
        build_kernel_library({}, o);
        ADD_FAILURE() << "an empty library built";
    } catch (const looptool::Error &e) {
        EXPECT_NE(std::string(e.what()).find("no kernels"), std::string::npos) << e.what();
    }
    const auto entries = test_entries();
    build_kernel_library({entries[0]}, o);
    const std::string so = tests::slurp(dir.path / "out" / "liblooptune_kernels.so");
    auto bad_cc = o;
    bad_cc.cc = "/nonexistent/cc";
    try {
        build_kernel_library(entries, bad_cc);
        ADD_FAILURE() << "built without a compiler";
    } catch (const looptool::Error &e) {
        EXPECT_NE(std::string(e.what()).find("no C compiler"), std::string::npos) << e.what();
    }
    auto failing_cc = o;
    failing_cc.cc = "false";  // found, but fails
    EXPECT_THROW(build_kernel_library(entries, failing_cc), looptool::Error);
    auto wrong = entries[1];
    wrong.shape = {17, 33, 41};  // the program's tensors do not have this shape
    try {
        build_kernel_library({entries[0], wrong}, o);
        ADD_FAILURE() << "built a kernel of the wrong shape";
    } catch (const looptool::Error &e) {
        EXPECT_NE(std::string(e.what()).find("17x33x41"), std::string::npos) << e.what();
    }
    EXPECT_EQ(tests::slurp(dir.path / "out" / "liblooptune_kernels.so"), so);
    int files = 0;
    for (const auto &e : std::filesystem::directory_iterator(dir.path / "out")) {
        EXPECT_EQ(e.path().filename().string().rfind(".lt-build", 0), std::string::npos);
        ++files;
    }
    EXPECT_EQ(files, 4);
}

}  // namespace
}  // namespace looptune

namespace looptune {
namespace {

// `looptool lib build` over a store's schedule library: the machine's entries, the block from
// the library, --json; an empty library (for that machine) and bad options are errors.
TEST(KernelLibrary, CliBuildsFromAStoreAndRefusesAnEmptyOne) {
    TempDir dir("kernel_library_cli");
    {
        auto library = ScheduleLibrary::open(dir / "s.sqlite");
        for (LibraryEntry e : test_entries()) library->put(e);
    }
    auto r = tests::run_cli(dir,
                            "lib build --store s.sqlite --out lib --machine test-machine "
                            "--block 17,33,40 --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["kernels"].size(), 5u);
    EXPECT_EQ(j["block"]["source"], "library");
    EXPECT_EQ(j["machine"], "test-machine");
    for (const char *f : {"liblooptune_kernels.so", "liblooptune_kernels.a", "looptune_kernels.h",
                          "looptune_kernels.json"})
        EXPECT_TRUE(std::filesystem::exists(dir.path / "lib" / f)) << f;
    r = tests::run_cli(dir, "lib build --store s.sqlite --out lib2 --machine other-machine");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error: lib build: the schedule library of s.sqlite has no kernels for "
                         "machine other-machine (it has kernels for test-machine)"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path / "lib2"));
    r = tests::run_cli(dir,
                       "lib build --store s.sqlite --out lib3 --machine test-machine "
                       "--block 16,32");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error: --block: expected M,N,K"), std::string::npos) << r.err;
    r = tests::run_cli(dir, "lib build --store missing.sqlite --out lib4");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("missing.sqlite"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace looptune
