// The transformer layer (looptool/gen/transformer.h, experiments/transformer_layer.h): each op
// verified, our scheduled kernels chained give the interpreter's chain's output and oneDNN's
// primitives' output on a small layer.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "baselines/onednn_primitive.h"
#include "baselines/reference_kernels.h"
#include "experiments/transformer_layer.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "search/seeds.h"
#include "test_util.h"

using namespace looptool;

namespace {

// Each op scheduled: its first seed where it has seeds (the matmuls and attention's), else a
// seeded random walk of legal actions; each verified against the reference.
std::vector<Program> scheduled(const std::vector<LayerOp> &ops, Jit &jit) {
    std::mt19937_64 rng(43);
    std::vector<Program> out;
    for (const LayerOp &op : ops) {
        Program p = Program::naive(std::make_shared<const Computation>(op.comp));
        const auto seeds = looptune::tune_seeds(op.comp, 1, ActionSpace::preset("full"));
        if (!seeds.empty())
            for (Action a : seeds.front().actions) p = apply(p, a);
        else
            p = tests::random_walk(p, rng, 12);
        EXPECT_TRUE(tests::matches_reference(jit, p)) << op.comp.name;
        out.push_back(p);
    }
    return out;
}

}  // namespace

TEST(Transformer, TheLayerChainsItsOps) {
    const auto ops = transformer_layer(transformer_shape("bert-base-128"));
    ASSERT_EQ(ops.size(), 11u);
    const auto sizes = looptune::layer_tensor_sizes(ops);
    EXPECT_EQ(sizes.at("x"), 128 * 768);
    EXPECT_EQ(sizes.at("s"), 12 * 128 * 128);
    EXPECT_EQ(sizes.at("f1"), 128 * 3072);
    EXPECT_EQ(sizes.at("y"), 128 * 768);
    int epilogues = 0;
    for (const LayerOp &op : ops) epilogues += op.epilogue;
    EXPECT_EQ(epilogues, 6);
    EXPECT_THROW(transformer_shape("gpt-5"), Error);
    EXPECT_EQ(transformer_shape("bert-base-131").tokens, 131);
    for (const char *bad : {"bert-base-", "bert-base-0", "bert-base-12x", "bert-base-99999"})
        EXPECT_THROW(transformer_shape(bad), Error) << bad;
    tests::TempDir dir("transformer");
    const auto paths = write_transformer_dataset(transformer_shape("tiny"), dir.path.string());
    ASSERT_EQ(paths.size(), 11u);
    const auto tiny = transformer_layer(transformer_shape("tiny"));
    for (size_t i = 0; i < paths.size(); ++i)
        EXPECT_TRUE(load_program_file(paths[i]).computation() == tiny[i].comp) << paths[i];
}

// A small layer end to end: our scheduled kernels chained against the interpreter's chain of the
// naive nests, and against oneDNN's primitives run one after another, on the same inputs.
TEST(Transformer, ChainedKernelsMatchTheInterpreterAndOnednn) {
    looptune::bench::set_library_threads(1);
    const TransformerShape s = transformer_shape("tiny");
    const auto ops = transformer_layer(s);
    auto jit = Jit::create();
    const std::vector<Program> ours_p = scheduled(ops, *jit);
    std::vector<Program> naive_p;
    for (const LayerOp &op : ops)
        naive_p.push_back(Program::naive(std::make_shared<const Computation>(op.comp)));
    looptune::LayerTensors ours = looptune::layer_inputs(s, ops, 9), interp = ours, dnn = ours;
    looptune::run_layer(ops, ours_p, ours);
    looptune::run_layer(ops, naive_p, interp, true);
    looptune::OnednnLayer layer(s, ops, dnn);
    for (const LayerOp &op : ops)
        EXPECT_EQ(layer.description(op.group).find("no oneDNN"), std::string::npos);
    layer.run_all();
    for (const char *t : {"q", "s", "p", "ctx", "h1", "n1", "f1", "h2", "y"}) {
        const auto a = looptune::tensor_diff(ours, interp, t),
                   b = looptune::tensor_diff(ours, dnn, t);
        EXPECT_GT(a.max_abs, 0.01) << t;  // not all zeros
        EXPECT_LE(a.max_abs_diff, 1e-4 * std::max(1.0, a.max_abs)) << t;
        EXPECT_LE(b.max_abs_diff, 1e-4 * std::max(1.0, b.max_abs)) << t;
    }
    // A wrong chain shows: another input changes the output.
    looptune::LayerTensors other = looptune::layer_inputs(s, ops, 10);
    looptune::run_layer(ops, ours_p, other);
    EXPECT_GT(looptune::tensor_diff(ours, other, "y").max_abs_diff, 1e-2);
}

// The stored dataset is what transformer_layer builds, op by op.
TEST(Transformer, TheStoredDatasetIsTheLayer) {
    for (const TransformerShape &s : transformer_shapes()) {
        const auto ops = transformer_layer(s);
        const std::string dir = std::string(LOOPTUNE_DATASETS_DIR) + "/transformer/" + s.name;
        for (size_t i = 0; i < ops.size(); ++i) {
            const std::string path = fmt::format("{}/{:02d}_{}", dir, i + 1, ops[i].comp.name);
            EXPECT_TRUE(load_program_file(path).computation() == ops[i].comp) << path;
        }
    }
}
