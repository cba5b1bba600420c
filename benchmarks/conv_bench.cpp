// Side-by-side conv2d benchmark (docs/performance.md, "Conv2d"), single-threaded and pinned:
// our JIT's schedule of each conv benchmark (the best measured row of a `looptool compare`
// results.csv, or the naive nest) against oneDNN's direct convolution on our NCHW/OIHW tensors
// (onednn-conv-plain) and in its preferred blocked layouts (onednn-conv-best, reorders not
// timed): baselines/onednn_conv.h. Every kernel is checked once against the reference before
// it is timed; the sides alternate round by round and each figure is the median of its
// per-round medians.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "baselines/onednn_conv.h"
#include "baselines/reference_kernels.h"
#include "baselines/side_by_side.h"
#include "env/dataset.h"
#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"
#include "search/tile_schedules.h"
#include "util/stats.h"

using looptune::geomean;
using looptune::median;

using namespace looptool;
namespace lb = looptune::bench;
namespace fs = std::filesystem;

namespace {

struct Best {
    std::string method, actions;
    double gflops = 0;
};

// The fastest measured non-library row per benchmark of a compare results.csv (columns by name).
std::map<std::string, Best> best_schedules(const std::string &path) {
    std::istringstream in(read_file(path));
    std::string line;
    std::vector<std::string> head;
    auto split = [](const std::string &l) {
        std::vector<std::string> f;
        std::string cur;
        for (char ch : l + ",")
            if (ch == ',')
                f.push_back(cur), cur.clear();
            else
                cur += ch;
        return f;
    };
    if (!std::getline(in, line)) throw Error(fmt::format("{}: empty", path));
    head = split(line);
    auto col = [&](const char *name) {
        auto it = std::find(head.begin(), head.end(), name);
        if (it == head.end()) throw Error(fmt::format("{}: no column '{}'", path, name));
        return size_t(it - head.begin());
    };
    const size_t b = col("benchmark"), m = col("method"), g = col("gflops"), a = col("actions"),
                 e = col("error");
    std::map<std::string, Best> out;
    while (std::getline(in, line)) {
        auto f = split(line);
        if (f.size() != head.size() || !f[e].empty() || f[m].rfind("onednn", 0) == 0 ||
            f[m] == "openblas")
            continue;
        const double gf = std::stod(f[g]);
        if (gf > out[f[b]].gflops) out[f[b]] = {f[m], f[a], gf};
    }
    return out;
}

struct Side {
    std::string name;
    KernelFn fn = nullptr;
    std::function<void()> before;  // makes this side's oneDNN primitive the active one
    std::vector<double> gflops;
};

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Side-by-side conv2d benchmark: our JIT's schedules vs oneDNN's convolution"};
    std::string dataset, split = "all", schedules, only;
    lb::SideBySide sides;
    sides.min_time = 0.2;
    app.add_option("--dataset", dataset, "Directory of conv benchmark files")->required();
    app.add_option("--split", split, "train, test or all (env/dataset.h)");
    app.add_option("--benchmarks", only, "Only these benchmarks (comma-separated names)");
    app.add_option("--schedules", schedules,
                   "A compare results.csv: each benchmark's fastest measured row is our side "
                   "(default: the naive nest)");
    bool family = false, members = false;
    app.add_flag("--members", members,
                 "With --family: print each member's short-protocol GFLOPS to stderr");
    app.add_flag("--family", family,
                 "Also try every member of the `tile` template's conv family (short protocol) "
                 "and keep the fastest candidate as our side");
    sides.add_options(app);
    CLI11_PARSE(app, argc, argv);
    try {
        lb::load_onednn();
        const MeasureOptions o = sides.start(60);
        const int core = sides.core;
        auto jit = Jit::create();
        const double peak = measure_peak_gflops(0.3).gflops;
        const auto best =
            schedules.empty() ? std::map<std::string, Best>{} : best_schedules(schedules);
        fmt::print("# conv2d benchmarks\n\ncpu: {} ({}), core {}\n{}\n", cpu_model_name(),
                   jit->host_cpu(), core, lb::onednn_version());
        fmt::print("peak (FMA chains, measured now): {:.1f} GFLOPS\n", peak);
        fmt::print(
            "protocol: {} warm-ups, median of >= {} calls and >= {} s, {} alternating "
            "rounds, median of rounds\n\n",
            o.warmup, o.min_runs, o.min_time_s, sides.rounds);
        fmt::print(
            "| benchmark | GFLOPs | ours GFLOPS | % peak | oneDNN plain | oneDNN best | "
            "ours / plain | ours / best | compile ms | our schedule | oneDNN impl (plain; "
            "best) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
        nlohmann::json out;
        out["cpu"] = cpu_model_name();
        out["onednn"] = lb::onednn_version();
        out["peak_gflops"] = peak;
        std::vector<double> vs_plain, vs_best;
        std::vector<std::string> wanted;
        for (std::string rest = only; !rest.empty();) {
            const size_t pos = rest.find(',');
            wanted.push_back(rest.substr(0, pos));
            rest = pos == std::string::npos ? "" : rest.substr(pos + 1);
        }
        for (const auto &file :
             looptune::Dataset::load(dataset).files(looptune::parse_split(split))) {
            const std::string name = fs::path(file).filename().string();
            if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), name) == wanted.end())
                continue;
            // The loaded computation, held here: a schedule with `flatten` replaces p.comp.
            const ComputationPtr comp = load_program_file(file).comp;
            Program p = Program::naive(comp);
            const Computation &c = *comp;
            std::string method = "base", actions;
            double compile_ms = 0;  // of our side's kernel, when first compiled
            if (auto it = best.find(name); it != best.end()) {
                method = it->second.method, actions = it->second.actions;
                for (Action a : parse_action_csv(actions, schedules)) p = apply(p, a);
            }
            Buffers inputs = make_buffers(c, 1);
            const Reference want = compute_reference(c, inputs);
            if (family) {  // the template's members and the given schedule, short protocol
                const MeasureOptions quick = sides.quick(0.05, 5);
                Buffers buf = inputs;
                Kernel given = jit->compile(p);
                compile_ms = given.compile_ms;
                double best_g = measure_kernel(given.fn, c, buf, quick).median_gflops;
                const Program naive = Program::naive(comp);
                auto extent = [&](const char *v) { return c.vars[size_t(c.var_index(v))].extent; };
                const bool one = extent("kh") == 1 && extent("kw") == 1;
                // Every member, the layout ones (flat, packed W) included.
                for (const auto &t : looptune::conv_schedule_family(
                         extent("m"), extent("wo"), one ? extent("ho") * extent("wo") : 0, true)) {
                    Program q = naive;
                    std::vector<Action> acts;
                    try {
                        acts = looptune::conv_tile_actions(c, t);
                    } catch (const Error &) {
                        continue;  // not expressible for this layer (a pack needs tm | co)
                    }
                    for (Action a : acts) q = apply(q, a);
                    Kernel kq = jit->compile(q);
                    const double g = measure_kernel(kq.fn, c, buf, quick).median_gflops;
                    if (members) fmt::print(stderr, "{} {}: {:.1f} GFLOPS\n", name, t.name(), g);
                    if (g > best_g)
                        best_g = g, p = q, method = "tile " + t.name(),
                        actions = looptune::format_actions(acts), compile_ms = kq.compile_ms;
                }
            }
            Kernel k = jit->compile(p);
            if (!family) compile_ms = k.compile_ms;
            {  // ours, on outputs that start as NaN so a skipped element cannot pass
                Buffers got = inputs;
                for (size_t t = 0; t < c.tensors.size(); ++t)
                    if (c.tensors[t].kind != TensorKind::Input)
                        std::fill(got.data[t].begin(), got.data[t].end(), std::nanf(""));
                int32_t cancel = 0;
                auto ptrs = got.pointers();
                k.fn(ptrs.data(), &cancel);
                Comparison cmp = compare_outputs(c, want, got);
                if (!cmp.ok)
                    throw Error(
                        fmt::format("{}: our schedule is wrong: {}", name, cmp.first_mismatch));
            }
            Buffers ours_buf = inputs, plain_buf = inputs, best_buf = inputs;
            lb::OnednnConv plain(c, lb::ConvLayout::Plain), bestc(c, lb::ConvLayout::Best);
            for (auto [conv, buf] : {std::pair{&plain, &plain_buf}, std::pair{&bestc, &best_buf}}) {
                conv->bind(*buf);
                conv->run();
                conv->finish();
                Comparison cmp = compare_outputs(c, want, *buf);
                if (!cmp.ok)
                    throw Error(fmt::format("{}: oneDNN is wrong: {}", name, cmp.first_mismatch));
            }
            Side ours{"ours", k.fn, [] {}, {}};
            Side sp{"plain", lb::onednn_conv_kernel, [&] { lb::set_active_conv(&plain); }, {}};
            Side sb{"best", lb::onednn_conv_kernel, [&] { lb::set_active_conv(&bestc); }, {}};
            for (int r = 0; r < sides.rounds; ++r)
                for (auto [s, buf] : {std::pair{&ours, &ours_buf}, std::pair{&sp, &plain_buf},
                                      std::pair{&sb, &best_buf}}) {
                    s->before();
                    s->gflops.push_back(measure_kernel(s->fn, c, *buf, o).median_gflops);
                }
            lb::set_active_conv(nullptr);
            const double g = median(ours.gflops), gp = median(sp.gflops), gb = median(sb.gflops);
            vs_plain.push_back(g / gp), vs_best.push_back(g / gb);
            fmt::print(
                "| {} | {:.2f} | {:.1f} | {:.0f}% | {:.1f} | {:.1f} | {:.2f} | {:.2f} | "
                "{:.1f} | {}: {} | {}; {} ({}) |\n",
                name, c.flops() / 1e9, g, 100 * g / peak, gp, gb, g / gp, g / gb, compile_ms,
                method, actions.empty() ? "naive" : actions, plain.implementation(),
                bestc.implementation(), bestc.layouts());
            std::fflush(stdout);
            out["rows"].push_back({{"benchmark", name},
                                   {"method", method},
                                   {"actions", actions},
                                   {"compile_ms", compile_ms},
                                   {"ours_gflops", ours.gflops},
                                   {"onednn_plain_gflops", sp.gflops},
                                   {"onednn_best_gflops", sb.gflops},
                                   {"onednn_plain_impl", plain.implementation()},
                                   {"onednn_best_impl", bestc.implementation()},
                                   {"onednn_best_layouts", bestc.layouts()}});
        }
        fmt::print(
            "\ngeomean over {} benchmarks: ours / oneDNN plain {:.2f}, ours / oneDNN best "
            "{:.2f}\n",
            vs_plain.size(), geomean(vs_plain), geomean(vs_best));
        out["geomean_vs_plain"] = geomean(vs_plain);
        out["geomean_vs_best"] = geomean(vs_best);
        if (!sides.json_path.empty()) write_file_atomically(sides.json_path, out.dump(2) + "\n");
    } catch (const std::exception &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
    return 0;
}
