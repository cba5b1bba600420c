#include <fmt/format.h>

#include <map>

#include "cli/commands.h"
#include "cli/validators.h"
#include "env/dataset.h"
#include "looptool/gen/generate.h"
#include "looptool/gen/random_shapes.h"
#include "looptool/ir/error.h"
#include "looptool/measure/traffic.h"

namespace looptool::cli {

namespace {

struct GenerateOptions {
    std::string kind = "mm", dim_a, dim_b, batch, out, layout = "bthd", epilogue;
    RandomShapeSpec random;
    int random_count = 0;
    int64_t stride = 1, pad = 0;
    bool json = false;
    CLI::Option *random_opt = nullptr, *dim_a_opt = nullptr, *dim_b_opt = nullptr,
                *stride_opt = nullptr, *pad_opt = nullptr, *layout_opt = nullptr;
};

void print_written(const GenerateOptions &o, const std::vector<std::string> &paths,
                   const std::map<std::string, std::string> &family) {
    if (o.json) {
        nlohmann::json j;
        j["count"] = paths.size();
        j["dir"] = o.out;
        j["files"] = paths;
        if (!family.empty()) j["family"] = family;
        print_json(j);
    } else {
        fmt::print("wrote {} benchmark{} to {}\n", paths.size(), paths.size() == 1 ? "" : "s",
                   o.out);
    }
}

// The dataset --kind asks for, checked against the options given.
int run_generate(GenerateOptions &o) {
    if (o.kind != "conv" && (o.stride_opt->count() > 0 || o.pad_opt->count() > 0))
        throw Error("generate: --stride and --pad are for --kind conv");
    if (o.kind != "mm" && !o.epilogue.empty()) throw Error("generate: --epilogue is for --kind mm");
    std::vector<MatmulShape> shapes;
    std::map<std::string, std::string> family;
    std::vector<std::string> paths;
    const bool attention = o.kind == "scores" || o.kind == "context";
    if (!attention && o.layout_opt->count() > 0)
        throw Error("generate: --layout is for --kind scores and context");
    if (attention) {
        if (o.random_opt->count() > 0 || o.dim_b_opt->count() > 0 || o.dim_a.empty())
            throw Error(fmt::format(
                "generate --kind {}: give --dimA H_RANGE,T_RANGE,D_RANGE (heads, tokens, head "
                "dimension) and optionally --batch B_RANGE",
                o.kind));
        const HeadLayout layout =
            o.layout == "bhtd" ? HeadLayout::HeadsMajor : HeadLayout::TokenMajor;
        paths = write_attention_dataset(o.kind, o.batch.empty() ? "1" : o.batch, o.dim_a, layout,
                                        o.out);
        print_written(o, paths, family);
        return 0;
    }
    if (o.kind != "mm" && o.kind != "bmm" && o.kind != "conv") {
        if (o.random_opt->count() > 0 || o.dim_b_opt->count() > 0 || o.dim_a.empty())
            throw Error(
                fmt::format("generate --kind {}: give --dimA ROWS_RANGE,COLS_RANGE only", o.kind));
        print_written(o, write_rowop_dataset(o.kind, o.dim_a, o.out), family);
        return 0;
    }
    if (o.kind == "conv") {
        if (o.random_opt->count() > 0)
            throw Error("generate: --random makes matmuls only (--kind mm)");
        if (o.dim_a.empty() || o.dim_b.empty())
            throw Error(
                "generate --kind conv: give --dimA N,C,H[,W] and --dimB M,C,KH,KW (range "
                "syntax)");
        paths = write_conv_dataset(conv_shapes(o.dim_a, o.dim_b, o.stride, o.pad), o.out);
    } else if (o.random_opt->count() > 0) {
        if (o.dim_a_opt->count() > 0 || o.dim_b_opt->count() > 0)
            throw Error("generate: --random excludes --dimA and --dimB (one spec per dataset)");
        o.random.count = o.random_count;
        for (const auto &n : looptune::Dataset::looptune_test_names()) o.random.excluded.insert(n);
        for (const auto &r : random_matmul_shapes(o.random)) {
            shapes.push_back(r.shape);
            family[r.shape.name()] = shape_family_name(r.family);
        }
    } else {
        if (o.dim_a.empty() || o.dim_b.empty())
            throw Error(
                "generate: give --dimA and --dimB (LoopTune's range syntax), or --random N");
        shapes = matmul_shapes(o.dim_a, o.dim_b);
    }
    if (o.kind == "mm") paths = write_matmul_dataset(shapes, o.out, parse_epilogue(o.epilogue));
    if (o.kind == "bmm") {
        if (o.batch.empty() || o.random_opt->count() > 0)
            throw Error("generate --kind bmm: give --batch B_RANGE with --dimA and --dimB");
        paths = write_bmm_dataset(parse_range(o.batch), shapes, o.out);
    }
    print_written(o, paths, family);
    return 0;
}

}  // namespace

Run add_generate(CLI::App &app) {
    auto *cmd = app.add_subcommand("generate", "Write a benchmark dataset, one file per shape");
    auto o = std::make_shared<GenerateOptions>();
    cmd->add_option("--kind", o->kind,
                    "Computation kind: mm (matmul), bmm (batched matmul: --dimA and --dimB as mm, "
                    "--batch), conv (conv2d; --stride, --pad), softmax or layernorm (over "
                    "each row of a ROWS x COLS input: --dimA ROWS_RANGE,COLS_RANGE), gelu or "
                    "gelu-tanh (elementwise, the erf or tanh form; --dimA as softmax), scores "
                    "(attention's Q.K^T per head) or context (P.V per head): --dimA "
                    "H_RANGE,T_RANGE,D_RANGE, --batch, --layout")
        ->check(CLI::IsMember({"mm", "bmm", "conv", "softmax", "layernorm", "gelu", "gelu-tanh",
                               "scores", "context"}))
        ->capture_default_str();
    auto *dim_a =
        cmd->add_option("--dimA", o->dim_a,
                        "mm: M_RANGE,K_RANGE; conv: N_RANGE,C_RANGE,H_RANGE[,W_RANGE] (square "
                        "images without W_RANGE). Ranges: a:b:c, a:b, a|b|c or n");
    auto *dim_b = cmd->add_option("--dimB", o->dim_b,
                                  "mm: K_RANGE,N_RANGE; conv: M_RANGE,C_RANGE,KH_RANGE,KW_RANGE");
    auto *stride = cmd->add_option("--stride", o->stride, "conv: the stride (rows and columns)")
                       ->capture_default_str();
    auto *pad = cmd->add_option("--pad", o->pad,
                                "conv: zero padding on each side of the image (below the kernel; "
                                "1 for a 3x3 conv keeps the image's size at stride 1)")
                    ->capture_default_str();
    cmd->add_option("--batch", o->batch,
                    "bmm: B_RANGE, the batch sizes (e.g. attention's heads); scores, context: "
                    "the sequences (default 1)");
    o->layout_opt =
        cmd->add_option("--layout", o->layout,
                        "scores, context: where the heads sit in Q, K, V and the context: bthd "
                        "(token-major, as a projection writes them) or bhtd (heads-major)")
            ->check(CLI::IsMember({"bthd", "bhtd"}))
            ->capture_default_str();
    cmd->add_option("--epilogue", o->epilogue,
                    "mm: C = act(A B + bias) + R, any of bias, relu|gelu|gelu-tanh, residual "
                    "(comma-separated), written as a temporary and an elementwise nest");
    auto *random = cmd->add_option(
        "--random", o->random_count,
        "Instead of ranges: N distinct seeded random shapes, 40% log-uniform over 1..4096 per "
        "dimension, 20% skinny (one side <= 16), 20% ragged (17..1023, no multiple of 8), 20% "
        "large (working set above L2); LoopTune's 25 test benchmarks are never drawn");
    cmd->add_option("--seed", o->random.seed, "Seed of --random")
        ->capture_default_str()
        ->check(unsigned_int());
    cmd->add_option("--max-macs", o->random.max_macs, "--random: at most this many m*n*k")
        ->capture_default_str();
    o->random.l2_bytes = looptool::private_cache_bytes();
    cmd->add_option("--l2-bytes", o->random.l2_bytes,
                    "--random: the L2 size that large shapes exceed (default: this core's)")
        ->capture_default_str();
    cmd->add_option("--out", o->out, "Output directory")->required();
    cmd->add_flag("--json", o->json, "Machine-readable output");
    o->random_opt = random;
    o->dim_a_opt = dim_a;
    o->dim_b_opt = dim_b;
    o->stride_opt = stride;
    o->pad_opt = pad;
    return [o] { return run_generate(*o); };
}

}  // namespace looptool::cli
