// Benchmark generation: LoopTune's range syntax and the matmul dataset.
#include "looptool/gen/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptool;
namespace fs = std::filesystem;

namespace {
std::string range_error(std::string_view text) {
    try {
        parse_range(text);
    } catch (const Error &e) {
        return e.what();
    }
    return "<no error>";
}
}  // namespace

TEST(Generate, CorpusRangesGiveExactlyTheCorpusNames) {
    auto shapes = matmul_shapes("64:256:16,64:256:16", "64:256:16,64:256:16");
    std::set<std::string> names;
    for (const auto &s : shapes) names.insert(s.name());
    EXPECT_EQ(shapes.size(), 2197u);
    EXPECT_EQ(names.size(), 2197u);
    std::set<std::string> corpus;
    for (const auto &e :
         fs::directory_iterator(fs::path(LOOPTUNE_CORPUS_DIR) / "mm64_256_16_range"))
        corpus.insert(e.path().filename().string());
    EXPECT_EQ(names, corpus);
    // Sorted by name, and the name is mm{m}_{n}_{k}.
    EXPECT_TRUE(std::is_sorted(shapes.begin(), shapes.end(),
                               [](const auto &a, const auto &b) { return a.name() < b.name(); }));
    EXPECT_EQ((MatmulShape{64, 80, 96}.name()), "mm64_80_96");
}

TEST(Generate, DimensionsComeFromTheRightRanges) {
    auto shapes = matmul_shapes("3,5", "5,7");  // A is m x k = 3 x 5, B is k x n = 5 x 7
    ASSERT_EQ(shapes.size(), 1u);
    EXPECT_EQ(shapes[0].m, 3);
    EXPECT_EQ(shapes[0].k, 5);
    EXPECT_EQ(shapes[0].n, 7);
    EXPECT_EQ(matmul_shapes("1:2,4|8", "4|8,3").size(), 2u * 2u * 1u);
}

TEST(Generate, RangeSyntax) {
    EXPECT_EQ(parse_range("64:256:16").size(), 13u);
    EXPECT_EQ(parse_range("64:256:16").front(), 64);
    EXPECT_EQ(parse_range("64:256:16").back(), 256);
    EXPECT_EQ(parse_range("64:250:16").back(), 240);  // the end is included only when reached
    EXPECT_EQ(parse_range("1:4"), (std::vector<int64_t>{1, 2, 3, 4}));
    EXPECT_EQ(parse_range("3|1|2|3"), (std::vector<int64_t>{1, 2, 3}));  // sorted, unique
    EXPECT_EQ(parse_range("7"), (std::vector<int64_t>{7}));
    EXPECT_EQ(parse_range("5:5"), (std::vector<int64_t>{5}));
}

TEST(Generate, BadRangesAreErrorsNamingTheText) {
    for (const char *bad : {"", "0", "-3", "a", "4:1", "1:2:3:4", "1:10:0", "1::2", "2|", "|",
                            "1.5", "2000000", "99999999999", "1:1000000"}) {
        std::string m = range_error(bad);
        EXPECT_NE(m, "<no error>") << "'" << bad << "'";
        EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
    }
}

TEST(Generate, MismatchedOrMalformedDimsAreErrors) {
    try {
        matmul_shapes("64,32", "16,64");
        FAIL() << "expected an Error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("K ranges"), std::string::npos) << e.what();
    }
    EXPECT_THROW(matmul_shapes("64", "64,64"), Error);
    EXPECT_THROW(matmul_shapes("64,64", "64,64,64"), Error);
    // A tensor above 2^31 elements: A is 65536 x 65536.
    try {
        matmul_shapes("65536,65536", "65536,4");
        FAIL() << "expected an Error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("2^31"), std::string::npos) << e.what();
    }
}

TEST(Generate, DatasetFilesLoadAsNaiveMatmuls) {
    tests::TempDir dir("generate");
    auto shapes = matmul_shapes("1|37,3", "3,129|4");
    auto paths = write_matmul_dataset(shapes, dir / "sub/ds");
    ASSERT_EQ(paths.size(), 4u);
    for (size_t i = 0; i < shapes.size(); ++i) {
        EXPECT_EQ(fs::path(paths[i]).filename().string(), shapes[i].name());
        Program p = load_program_file(paths[i]);
        EXPECT_TRUE(p.same_as(tests::matmul_program(shapes[i].m, shapes[i].n, shapes[i].k)))
            << paths[i];
    }
    size_t files = 0;
    for (const auto &e : fs::directory_iterator(dir / "sub/ds")) {
        ++files;
        EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos);
    }
    EXPECT_EQ(files, 4u);
    // A file where the directory should be.
    write_file_atomically(dir / "plain", "x");
    EXPECT_THROW(write_matmul_dataset(shapes, dir / "plain"), Error);
}

TEST(Generate, ConvRangesRemakeLoopTunesEightyOneConvBenchmarks) {
    // Square images (no W range), as LoopTune generated its corpus.
    auto shapes = conv_shapes("1|32|64,32|64|128,56|112|256", "1|32|64,32|64|128,3,3");
    ASSERT_EQ(shapes.size(), 81u);
    std::set<std::string> corpus;
    for (const auto &e : fs::directory_iterator(fs::path(LOOPTUNE_CORPUS_DIR) / "conv"))
        corpus.insert(e.path().filename().string());
    std::set<std::string> names;
    for (const auto &s : shapes) names.insert(s.name());
    EXPECT_EQ(names, corpus);
    // Each generated file is the same program as the corpus file imported (conv1_32_56_56 and
    // the first few: writing all 81 naive programs is cheap, loading them is too).
    tests::TempDir dir("generate_conv");
    std::vector<ConvShape> some(shapes.begin(), shapes.begin() + 6);
    auto paths = write_conv_dataset(some, dir / "conv");
    for (size_t i = 0; i < some.size(); ++i) {
        Program ours = load_program_file(paths[i]);
        Program theirs =
            load_program_file((fs::path(LOOPTUNE_CORPUS_DIR) / "conv" / some[i].name()).string());
        EXPECT_TRUE(ours.same_as(theirs)) << some[i].name();
    }
    // A W range gives every (h, w) pair; a kernel larger than the image is an error.
    EXPECT_EQ(conv_shapes("1,3,8,9|10", "4,3,3,3").size(), 2u);
    EXPECT_EQ(conv_shapes("1,3,8,9|10", "4,3,3,3")[0].name(), "conv1_3_8_10__4_3_3_3");
    EXPECT_THROW(conv_shapes("1,3,2", "4,3,3,3"), Error);
    EXPECT_THROW(conv_shapes("1,3,8", "4,5,3,3"), Error);  // C ranges differ
    EXPECT_THROW(conv_shapes("1,3", "4,3,3,3"), Error);    // too few input dims
}
