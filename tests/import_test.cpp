// The loop_tool importer on LoopTune's whole matmul corpus, on scheduled files, and on bad input.
#include "looptool/formats/loop_tool_import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>

#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptool;
namespace fs = std::filesystem;

namespace {
constexpr int M = 0, K = 1, N = 2;
const fs::path kCorpus = LOOPTUNE_CORPUS_DIR;

std::vector<fs::path> files_in(const fs::path &dir) {
    std::vector<fs::path> out;
    for (const auto &e : fs::directory_iterator(dir))
        if (e.is_regular_file()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

// LoopTune's matmul graph with the given loop orders for the multiply/add and the write.
std::string lt_matmul(const std::string &compute_order, const std::string &write_order,
                      const std::string &compute_annots = ",,,",
                      const std::string &write_annots = ",,") {
    return "v:m_1\nv:k_2\nv:n_3\n"
           "n:2::0,1,:::0:::::\n"
           "n:2::1,2,:::0:::::\n"
           "n:7:0,1,:0,1,2,:::0:" +
           compute_order + "::" + compute_annots +
           "::\n"
           "n:5:2,:0,2,:::0:" +
           compute_order + "::" + compute_annots +
           "::\n"
           "n:1:3,:0,2,:::0:" +
           write_order + "::" + write_annots +
           "::\n"
           "i:0,1,\no:4,\n";
}

std::string import_error(const std::string &text, const std::string &source = "bench/mmX") {
    try {
        import_loop_tool(text, source);
    } catch (const Error &e) {
        return e.what();
    }
    return "<no error>";
}
}  // namespace

TEST(Import, EveryCorpusMatmulIsTheNaiveNestOfItsShape) {
    const fs::path dir = kCorpus / "mm64_256_16_range";
    ASSERT_TRUE(fs::is_directory(dir)) << dir << " (set up ../shared beside the clone)";
    auto files = files_in(dir);
    EXPECT_EQ(files.size(), 2197u);
    for (const auto &f : files) {
        const std::string name = f.filename().string();
        int64_t m = 0, n = 0, k = 0;
        char extra = 0;
        ASSERT_EQ(std::sscanf(name.c_str(), "mm%ld_%ld_%ld%c", &m, &n, &k, &extra), 3) << name;
        Program p = import_loop_tool(read_file(f.string()), f.string());
        // A is m x k, B is k x n.
        Computation want = make_matmul(m, n, k, name);
        ASSERT_EQ(*p.comp, want) << name;
        EXPECT_EQ(p.comp->tensors[0].shape, (std::vector<int64_t>{m, k})) << name;
        EXPECT_EQ(p.comp->tensors[1].shape, (std::vector<int64_t>{k, n})) << name;
        EXPECT_EQ(p.tree, naive_loop_tree(want)) << name;
        EXPECT_EQ(p.cursor, 0);
    }
}

TEST(Import, LoadProgramFileDispatchesToTheImporter) {
    const fs::path f = kCorpus / "mm64_256_16_range" / "mm64_80_96";
    Program p = load_program_file(f.string());
    EXPECT_EQ(p.comp->name, "mm64_80_96");
    EXPECT_TRUE(p.same_as(tests::matmul_program(64, 80, 96)) ||
                *p.comp == make_matmul(64, 80, 96, "mm64_80_96"));
    Comparison c = verify_schedule(apply(p, Action::Split16));
    EXPECT_TRUE(c.ok) << c.first_mismatch;
}

namespace {
struct ConvName {
    int64_t n, c, h, w, m, kh, kw;
};

ConvName parse_conv_name(const std::string &name) {
    ConvName s{};
    int64_t c2 = 0;
    char extra = 0;
    EXPECT_EQ(std::sscanf(name.c_str(), "conv%ld_%ld_%ld_%ld__%ld_%ld_%ld_%ld%c", &s.n, &s.c, &s.h,
                          &s.w, &s.m, &c2, &s.kh, &s.kw, &extra),
              8)
        << name;
    EXPECT_EQ(c2, s.c) << name;
    return s;
}

// A tensor element's value as a function of its flat index: no buffer, so the largest corpus
// conv (X has 537M elements) costs nothing to "fill".
double element(int tensor, int64_t flat) {
    uint64_t x = uint64_t(flat) * 0x9E3779B97F4A7C15ull + uint64_t(tensor) * 0xD1B54A32D192ED03ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return double(x % 2001) / 1000.0 - 1.0;
}

// The access in bounds (asserted per dimension), then its flat offset.
int64_t checked_flat_index(const Computation &comp, const Access &a,
                           const std::vector<int64_t> &point) {
    int64_t flat = 0;
    const Tensor &t = comp.tensors[size_t(a.tensor)];
    for (size_t d = 0; d < a.index.size(); ++d) {
        int64_t i = a.index[d].offset;
        for (const auto &term : a.index[d].terms) i += term.coef * point[size_t(term.var)];
        EXPECT_GE(i, 0);
        EXPECT_LT(i, t.shape[d]);
        flat += i * t.stride(d);
    }
    return flat;
}
}  // namespace

TEST(Import, EveryCorpusConvIsTheNaiveNestOfItsConv2d) {
    const fs::path dir = kCorpus / "conv";
    auto files = files_in(dir);
    ASSERT_EQ(files.size(), 81u);
    int fully_verified = 0;
    for (const auto &f : files) {
        const std::string name = f.filename().string();
        const ConvName s = parse_conv_name(name);
        Program p = load_program_file(f.string());
        // The view `h = ho + kh, w = wo + kw` became the access X[n, c, ho + kh, wo + kw].
        Computation want = make_conv2d(s.n, s.c, s.h, s.w, s.m, s.kh, s.kw, name);
        ASSERT_EQ(*p.comp, want) << name;
        EXPECT_EQ(format_access(*p.comp, p.comp->stmts[0].value.args[0].access),
                  "X[n, c, ho+kh, wo+kw]");
        EXPECT_EQ(p.tree, naive_loop_tree(want)) << name;
        // Numerics, two ways. (1) Sampled output elements, for every file: the imported
        // statement evaluated at 16 points of (n, m, ho, wo), summing over (c, kh, kw), against
        // conv2d written out by hand, on the same element values.
        const auto &stmt = p.comp->stmts[0];
        std::mt19937_64 rng(std::hash<std::string>{}(name));
        const int64_t ho = s.h - s.kh + 1, wo = s.w - s.kw + 1;
        for (int sample = 0; sample < 16; ++sample) {
            // Corners first, then random points.
            std::vector<int64_t> pt(7, 0);  // n c ho wo kh kw m
            const int64_t ext_out[4] = {s.n, ho, wo, s.m};
            const int out_vars[4] = {0, 2, 3, 6};
            for (int i = 0; i < 4; ++i)
                pt[size_t(out_vars[i])] = sample < 2 ? (sample == 0 ? 0 : ext_out[i] - 1)
                                                     : int64_t(rng() % uint64_t(ext_out[i]));
            double got = 0, want_sum = 0;
            for (int64_t c = 0; c < s.c; ++c)
                for (int64_t kh = 0; kh < s.kh; ++kh)
                    for (int64_t kw = 0; kw < s.kw; ++kw) {
                        pt[1] = c, pt[4] = kh, pt[5] = kw;
                        got +=
                            element(0, checked_flat_index(*p.comp, stmt.value.args[0].access, pt)) *
                            element(1, checked_flat_index(*p.comp, stmt.value.args[1].access, pt));
                        const int64_t n = pt[0], y = pt[2] + kh, x = pt[3] + kw, m = pt[6];
                        want_sum += element(0, ((n * s.c + c) * s.h + y) * s.w + x) *
                                    element(1, ((m * s.c + c) * s.kh + kh) * s.kw + kw);
                    }
            ASSERT_EQ(got, want_sum) << name << " sample " << sample;
        }
        // (2) The whole naive nest through the interpreter against the reference, where that
        // takes well under a second (up to 1.2e7 multiply-adds).
        if (p.comp->flops() <= 2.4e7) {
            Comparison cmp = verify_schedule(p);
            EXPECT_TRUE(cmp.ok) << name << ": " << cmp.first_mismatch;
            ++fully_verified;
        }
    }
    EXPECT_GE(fully_verified, 1);
}

TEST(Import, AViewThatIsNotAConvIsRefusedNamingWhy) {
    std::string text = read_file((kCorpus / "conv" / "conv1_32_56_56__32_32_3_3").string());
    // h = ho * kh: a product of two variables is not affine.
    std::string product = text;
    product.replace(product.find("5|f|9,12,|"), 10, "6|f|9,12,|");
    EXPECT_NE(import_error(product, "bench/convP").find("unsupported view constraint function 6"),
              std::string::npos)
        << import_error(product, "bench/convP");
    // The view's symbol map loses h: X's first spatial index is undefined.
    std::string unmapped = text;
    unmapped.replace(unmapped.find("0=2,"), 4, "");
    EXPECT_NE(import_error(unmapped, "bench/convU").find("bench/convU"), std::string::npos);
    // size(h) smaller than ho + kh - 1 reaches.
    std::string small = text;
    small.replace(small.find("0|v|56|"), 7, "0|v|50|");
    EXPECT_NE(import_error(small, "bench/convS").find("beyond its size 50"), std::string::npos)
        << import_error(small, "bench/convS");
}

TEST(Import, ScheduledFilesKeepTheirScheduleAndAnnotations) {
    // m 37 split by 8 (4 r 5, then 8), n vectorized in chunks of 16, k unrolled.
    std::string text = lt_matmul("0;4;5,0;8;0,1;4;0,2;2;0,2;16;0,", "0;37;0,2;32;0,",
                                 ",,unroll,,vectorize,", ",,");
    Program p = import_loop_tool(text, "dir/mm37_32_4");
    EXPECT_EQ(p.comp->name, "mm37_32_4");
    EXPECT_EQ(*p.comp, make_matmul(37, 32, 4, "mm37_32_4"));
    EXPECT_EQ(p.tree.nests[0].loops,
              (std::vector<Loop>{Loop{M, 4, 5}, Loop{M, 8}, Loop{K, 4, 0, true}, Loop{N, 2},
                                 Loop{N, 16, 0, false, true}}));
    EXPECT_EQ(p.tree.nests[1].loops, (std::vector<Loop>{Loop{M, 37}, Loop{N, 32}}));
    Comparison c = verify_schedule(p);
    EXPECT_TRUE(c.ok) << c.first_mismatch;
}

TEST(Import, MalformedFilesAreErrorsNamingFileAndLine) {
    const std::string good = lt_matmul("0;8;0,1;8;0,2;8;0,", "0;8;0,2;8;0,");
    const std::string kWrite = "n:1:3,:0,2,:::0:0;8;0,2;8;0,";
    ASSERT_EQ(import_error(good), "<no error>");
    auto without = [&](const std::string &line) {
        std::string s = good;
        s.erase(s.find(line), line.size());
        return s;
    };
    auto with = [&](const std::string &from, const std::string &to) {
        std::string s = good;
        s.replace(s.find(from), from.size(), to);
        return s;
    };
    struct Case {
        std::string text, want;
    } cases[] = {
        {"", "bench/mmX: no variables"},
        {without("i:0,1,\n"), "bench/mmX: truncated"},
        {without("o:4,\n"), "bench/mmX: truncated"},
        {good.substr(0, good.size() / 2), "bench/mmX"},
        {with("n:7:", "n:99:"), "bench/mmX:6: unknown op code 99"},
        {with("n:7:", "n:x:"), "bench/mmX:6: bad op code 'x'"},
        {with("n:7:0,1,", "n:7:0,9,"), "bench/mmX:6: input node id 9 out of range"},
        {with("n:1:3,:0,2,", "n:1:3,:0,7,"), "bench/mmX:8: variable id 7 out of range"},
        {with(kWrite, "n:1:3,:0,2,:::0:0;8;0,2;8,"), "bench/mmX:8: bad loop '2;8'"},
        {with(kWrite, "n:1:3,:0,2,:::0:0;-8;0,2;8;0,"), "bench/mmX:8: bad loop size -8"},
        {with(kWrite, "n:1:3,:0,2,:::0:0;8;0,2;1099511627776;0,"), "bench/mmX:8"},
        {with(kWrite, "n:1:3,:0,2,:::0:0;4;0,2;8;0,"), "bench/mmX"},
        {with("i:0,1,", "x:0,1,"), "bench/mmX:9: unrecognized line"},
        {with("o:4,", "o:12,"), "output node id 12 out of range"},
        {with(kWrite + "::,,::", "n:1:3,:0,2,"), "bench/mmX:8: node line has too few"},
        {with("i:0,1,", "i:0,4294967296,"), "bench/mmX:9: input node id 4294967296 out of range"},
        // Well formed but not LoopTune's matmul.
        {with("n:7:", "n:6:"), "unsupported"},
        {with("o:4,", "o:3,"), "unsupported"},
        {with("n:7:0,1,:0,1,2,:::0:0;8;0,1;8;0,2;8;0,",
              "n:7:0,1,:0,1,2,:::0:0;8;0,1;8;0,2;8;0,2;8;0,"),
         "bench/mmX"},
        {with("0;8;0,2;8;0,::,,", "0;8;0,2;8;0,::,fast"),
         "bench/mmX:8: unsupported loop annotation 'fast'"},
        {with("0;8;0,2;8;0,::,,", "0;8;0,2;8;0,::vectorize,,"),
         "only the innermost loop can be vectorized"},
        // Loops whose coverage overflows int64: 16 * 2^60 + 64 wraps around to 64.
        {lt_matmul("0;16;64,0;1048576;0,0;1048576;0,0;1048576;0,1;8;0,2;8;0,", "0;64;0,2;8;0,"),
         "bench/mmX"},
    };
    for (const auto &c : cases) {
        std::string m = import_error(c.text);
        EXPECT_NE(m.find(c.want), std::string::npos) << "want '" << c.want << "' in: " << m;
        EXPECT_NE(m, "<no error>") << c.text;
    }
}

// loop_tool's IR is a DAG: a file whose node inputs loop back is refused, naming a node on the
// cycle and its line, before anything is built from it.
TEST(Import, AGraphWithACycleIsRejected) {
    std::string text = lt_matmul("0;8;0,1;8;0,2;8;0,", "0;8;0,2;8;0,");
    // The first read takes the write as its input: 0 -> 2 -> 3 -> 4 -> 0.
    text.replace(text.find("n:2::0,1,"), 9, "n:2:4,:0,1,");
    std::string m = import_error(text);
    EXPECT_NE(m.find("bench/mmX:"), std::string::npos) << m;
    EXPECT_NE(m.find("cycle"), std::string::npos) << m;
    // A node that is its own input.
    text = lt_matmul("0;8;0,1;8;0,2;8;0,", "0;8;0,2;8;0,");
    text.replace(text.find("n:5:2,"), 6, "n:5:3,");
    m = import_error(text);
    EXPECT_NE(m.find("bench/mmX:7: the node graph has a cycle through node 3"), std::string::npos)
        << m;
}
