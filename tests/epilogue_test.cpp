// Matmuls with an epilogue (looptool/gen/epilogue.h): the words, the computation generate writes,
// its recognition, `generate --epilogue`, and oneDNN's matmul with post-ops as its reference
// (baselines/onednn_matmul_postops.h), checked against ours.
#include <gtest/gtest.h>

#include "baselines/onednn_matmul_postops.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptool;

TEST(Epilogue, WordsParseAndPrintBack) {
    for (const char *w : {"bias", "relu", "bias,relu", "bias,gelu", "bias,gelu-tanh,residual",
                          "residual", "gelu,residual"})
        EXPECT_EQ(epilogue_text(parse_epilogue(w)), w);
    EXPECT_FALSE(parse_epilogue("").any());
    EXPECT_EQ(parse_epilogue("relu,bias"), (Epilogue{true, Activation::Relu, false}));
    for (const char *bad : {"bias,bias", "relu,gelu", "sigmoid", "bias,", ","})
        EXPECT_THROW(parse_epilogue(bad), Error) << bad;
}

TEST(Epilogue, ComputationAndRecognition) {
    const Computation c = make_matmul_epilogue(24, 40, 8, {true, Activation::Gelu, true});
    EXPECT_EQ(c.name, "mm24_40_8_bias_gelu_residual");
    EXPECT_EQ(format_stmt(c, c.stmts[0]), "T[m, n] += A[m, k] * B[k, n]");
    EXPECT_NE(format_stmt(c, c.stmts[1]).find("erf("), std::string::npos);
    const auto r = matmul_epilogue(c);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->m, 24);
    EXPECT_EQ(r->n, 40);
    EXPECT_EQ(r->k, 8);
    EXPECT_EQ(r->bias, 2);
    EXPECT_EQ(r->residual, 3);
    EXPECT_FALSE(matmul_epilogue(make_matmul(24, 40, 8)).has_value());
    Computation other = c;  // a different epilogue expression is not recognized
    other.stmts[1].value = Expr::read(other.stmts[1].value.args[1].access);
    EXPECT_FALSE(matmul_epilogue(other).has_value());
    EXPECT_EQ(make_matmul_epilogue(4, 5, 6, {}), make_matmul(4, 5, 6));
    // The naive nests of a matmul and its epilogue form are the same loops: the seeds apply.
    EXPECT_EQ(Program::naive(std::make_shared<Computation>(c)).tree,
              Program::naive(std::make_shared<Computation>(make_matmul(24, 40, 8))).tree);
}

TEST(Epilogue, GenerateWritesTheTwoNestForm) {
    tests::TempDir dir("epilogue_gen");
    auto g = tests::run_cli(dir, "generate --dimA 16,8 --dimB 8,24 --epilogue bias,relu --out ds");
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const Program p = load_program_file((dir.path / "ds" / "mm16_24_8_bias_relu").string());
    EXPECT_EQ(*p.comp, make_matmul_epilogue(16, 24, 8, {true, Activation::Relu, false}));
    EXPECT_EQ(p.tree.nests.size(), size_t(2));
    auto bad = tests::run_cli(dir, "generate --dimA 16,8 --dimB 8,24 --epilogue bias,tanh --out x");
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("error: epilogue 'bias,tanh': unknown word 'tanh'"), std::string::npos)
        << bad.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path / "x"));
    auto conv = tests::run_cli(dir,
                               "generate --kind conv --dimA 1,2,5 --dimB 2,2,3,3 "
                               "--epilogue relu --out y");
    EXPECT_NE(conv.exit_code, 0);
    EXPECT_NE(conv.err.find("--epilogue is for --kind mm"), std::string::npos) << conv.err;
}

// oneDNN's matmul with its bias descriptor, eltwise and binary post-ops computes each epilogue
// within our error bound (the measurer checks before it times), and refuses a plain matmul.
TEST(Epilogue, OnednnMatmulWithPostOpsMatchesTheReference) {
    namespace lb = looptune::bench;
    for (const char *w : {"bias", "bias,relu", "bias,gelu", "bias,gelu-tanh", "bias,residual",
                          "gelu,residual", "bias,gelu-tanh,residual"}) {
        const Computation c = make_matmul_epilogue(33, 40, 17, parse_epilogue(w));
        EXPECT_TRUE(lb::onednn_postops_runs_on(c));
        EXPECT_GT(lb::onednn_postops_measurer(c.name, c)(), 0) << w;
    }
    EXPECT_FALSE(lb::onednn_postops_runs_on(make_matmul(8, 8, 8)));
    EXPECT_THROW(lb::onednn_postops_measurer("mm", make_matmul(8, 8, 8)), Error);
}
