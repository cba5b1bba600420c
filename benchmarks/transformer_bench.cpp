// A transformer encoder layer (BERT-base at 128 and 384 tokens, ViT-B/16 at 197) tuned op by op
// with `tune`'s guided search, each op beside the oneDNN primitives that do its work, and the
// layer end to end: the sum of our kernels' medians against the sum of oneDNN's, and oneDNN's
// primitives run one after another as one call; our chained output against oneDNN's.
// Single-threaded, pinned. A projection and its epilogue (bias, GELU, residual) are one program
// of ours, marked "epilogue fused" where the tuned schedule runs the epilogue inside the
// matmul's loops (`fuse`).
// --write-dataset DIR writes each layer's programs (DIR/<layer>/NN_<op>) and exits.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "baselines/reference_kernels.h"
#include "experiments/transformer_layer.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"

using namespace looptool;

namespace {

std::string load_average() {
    std::ifstream f("/proc/loadavg");
    std::string a;
    f >> a;
    return a.empty() ? "?" : a;
}

void print_layer(const looptune::LayerFigures &f) {
    fmt::print("\n{}\n  {:<20} {:<10} {:>10}  {}\n", f.shape, "op", "group", "ours us", "found by");
    for (const auto &o : f.ops)
        fmt::print("  {:<20} {:<10} {:>10.1f}  {}{}\n", o.name, o.group, 1e6 * o.seconds,
                   o.found_by,
                   !o.epilogue ? ""
                   : o.fused   ? " (epilogue fused)"
                               : " (epilogue: a separate nest)");
    fmt::print("  {:<10} {:>10} {:>10} {:>8}  {}\n", "group", "ours us", "oneDNN us", "ratio",
               "oneDNN runs");
    for (const auto &g : f.groups)
        if (g.onednn_s > 0)
            fmt::print("  {:<10} {:>10.1f} {:>10.1f} {:>7.2f}x  {}\n", g.group, 1e6 * g.ours_s,
                       1e6 * g.onednn_s, g.onednn_s / g.ours_s, g.onednn);
        else
            fmt::print("  {:<10} {:>10.1f} {:>10} {:>8}  {}\n", g.group, 1e6 * g.ours_s, "-", "-",
                       g.onednn);
    fmt::print("  {}: ours {:.3f} ms (sum of medians), oneDNN {:.3f} ms (sum of medians) = {:.2f}x",
               f.onednn_chain_s > 0 ? "layer" : "these groups", 1e3 * f.ours_s, 1e3 * f.onednn_s,
               f.onednn_s / f.ours_s);
    if (f.onednn_chain_s > 0)
        fmt::print(", oneDNN's sequence as one call {:.3f} ms = {:.2f}x", 1e3 * f.onednn_chain_s,
                   f.onednn_chain_s / f.ours_s);
    fmt::print("\n");
    fmt::print(
        "  output y: ours against oneDNN's, largest |difference| {:.3g} (largest |y| {:.3g})\n",
        f.output.max_abs_diff, f.output.max_abs);
}

nlohmann::json layer_json(const looptune::LayerFigures &f) {
    nlohmann::json j{{"layer", f.shape},
                     {"ours_s", f.ours_s},
                     {"onednn_s", f.onednn_s},
                     {"onednn_chain_s", f.onednn_chain_s},
                     {"output_max_abs_diff", f.output.max_abs_diff},
                     {"output_max_abs", f.output.max_abs}};
    for (const auto &o : f.ops)
        j["ops"].push_back({{"op", o.name},
                            {"group", o.group},
                            {"epilogue", o.epilogue},
                            {"fused", o.fused},
                            {"seconds", o.seconds},
                            {"found_by", o.found_by},
                            {"actions", o.actions}});
    for (const auto &g : f.groups)
        j["groups"].push_back({{"group", g.group},
                               {"ours_s", g.ours_s},
                               {"onednn_s", g.onednn_s},
                               {"onednn", g.onednn}});
    return j;
}

int run(const std::vector<std::string> &layers, const looptune::LayerRunConfig &c,
        const std::string &json_path) {
    const int core = pin_to_core(-1);
    looptune::bench::set_library_threads(1);
    looptune::bench::load_onednn();
    auto jit = Jit::create();
    fmt::print(
        "transformer layer, 1 thread pinned to core {}, {} ({}), {}; load average {} at "
        "start (other work on the machine: figures loaded unless that is near 0)\n",
        core, jit->host_cpu(), looptune::bench::onednn_version(),
        c.tune ? fmt::format("tune budget {} s per op", c.budget_s) : "naive nests",
        load_average());
    nlohmann::json all = nlohmann::json::array();
    for (const std::string &name : layers) {
        const auto f = looptune::run_transformer_layer(transformer_shape(name), c);
        print_layer(f);
        all.push_back(layer_json(f));
    }
    fmt::print("load average {} at the end\n", load_average());
    if (!json_path.empty()) {
        std::ofstream out(json_path);
        out << all.dump(2) << "\n";
        if (!out) throw Error(fmt::format("{}: cannot write", json_path));
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"A transformer layer: our tuned kernels op by op against oneDNN's primitives"};
    std::vector<std::string> layers;
    for (const auto &s : transformer_shapes()) layers.push_back(s.name);
    looptune::LayerRunConfig c;
    std::string json_path, dataset;
    bool naive = false;
    app.add_option("--layer", layers,
                   "Layers (bert-base-128, bert-base-384, vit-b16-197, bert-base-N, tiny)")
        ->capture_default_str();
    app.add_option("--groups", c.groups,
                   "Only these ops, tuned and measured (qkv, scores, softmax, context, out, ln1, "
                   "ffn_up, ffn_down, ln2; default: the whole layer)");
    app.add_option("--budget-s", c.budget_s, "tune's budget per op")->capture_default_str();
    app.add_option("--rounds", c.rounds, "Alternating measurement rounds")->capture_default_str();
    app.add_option("--policy", c.policy, "Policy file (default: the shipped one)");
    app.add_option("--store", c.store, "Measurement store");
    app.add_flag("--naive", naive, "Do not tune: the naive nests (a dry run)");
    app.add_option("--json", json_path, "Also write the figures here");
    app.add_option("--write-dataset", dataset,
                   "Write each layer's programs under this directory and exit");
    CLI11_PARSE(app, argc, argv);
    c.tune = !naive;
    try {
        if (!dataset.empty()) {
            for (const std::string &name : layers) {
                const auto paths =
                    write_transformer_dataset(transformer_shape(name), dataset + "/" + name);
                fmt::print("wrote {} programs to {}/{}\n", paths.size(), dataset, name);
            }
            return 0;
        }
        return run(layers, c, json_path);
    } catch (const std::exception &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
}
