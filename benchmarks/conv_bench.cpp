// Side-by-side conv2d benchmark (docs/results.md), single-threaded and pinned:
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

struct Options {
    std::string dataset, split = "all", schedules, only;
    bool family = false, members = false;
    lb::SideBySide sides;
};

void add_options(CLI::App &app, Options &o) {
    o.sides.min_time = 0.2;
    app.add_option("--dataset", o.dataset, "Directory of conv benchmark files")->required();
    app.add_option("--split", o.split, "train, test or all (env/dataset.h)");
    app.add_option("--benchmarks", o.only, "Only these benchmarks (comma-separated names)");
    app.add_option("--schedules", o.schedules,
                   "A compare results.csv: each benchmark's fastest measured row is our side "
                   "(default: the naive nest)");
    app.add_flag("--members", o.members,
                 "With --family: print each member's short-protocol GFLOPS to stderr");
    app.add_flag("--family", o.family,
                 "Also try every member of the `tile` template's conv family (short protocol) "
                 "and keep the fastest candidate as our side");
    o.sides.add_options(app);
}

/// What every benchmark's row uses: the protocol, the JIT, the peak and the given schedules.
struct Bench {
    explicit Bench(Options &o) : opt(o) {}
    Options &opt;  // sides.start() pins and records the core
    MeasureOptions full;
    std::unique_ptr<Jit> jit;
    double peak = 0;
    std::map<std::string, Best> best;
    nlohmann::json out;
    std::vector<double> vs_plain, vs_best;
};

/// Pins, measures the peak, reads the schedules and prints the protocol and the table's head.
void start(Bench &b) {
    lb::load_onednn();
    b.full = b.opt.sides.start(60);
    const int core = b.opt.sides.core;
    b.jit = Jit::create();
    b.peak = measure_peak_gflops(0.3).gflops;
    if (!b.opt.schedules.empty()) b.best = best_schedules(b.opt.schedules);
    fmt::print("# conv2d benchmarks\n\ncpu: {} ({}), core {}\n{}\n", cpu_model_name(),
               b.jit->host_cpu(), core, lb::onednn_version());
    fmt::print("peak (FMA chains, measured now): {:.1f} GFLOPS\n", b.peak);
    fmt::print(
        "protocol: {} warm-ups, median of >= {} calls and >= {} s, {} alternating "
        "rounds, median of rounds\n\n",
        b.full.warmup, b.full.min_runs, b.full.min_time_s, b.opt.sides.rounds);
    fmt::print(
        "| benchmark | GFLOPs | ours GFLOPS | % peak | oneDNN plain | oneDNN best | "
        "ours / plain | ours / best | compile ms | our schedule | oneDNN impl (plain; "
        "best) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
    b.out["cpu"] = cpu_model_name();
    b.out["onednn"] = lb::onednn_version();
    b.out["peak_gflops"] = b.peak;
}

/// Our side of one benchmark: its schedule, where it came from, and its compile time.
struct Ours {
    explicit Ours(Program naive) : p(std::move(naive)) {}
    Program p;
    std::string method = "base", actions;
    double compile_ms = 0;  // of our side's kernel, when first compiled
};

/// With --family: the template's members and the given schedule, short protocol; the fastest
/// becomes our side.
void try_family(Bench &b, const ComputationPtr &comp, const std::string &name,
                const Buffers &inputs, Ours &ours) {
    const Computation &c = *comp;
    const MeasureOptions quick = b.opt.sides.quick(0.05, 5);
    Buffers buf = inputs;
    Kernel given = b.jit->compile(ours.p);
    ours.compile_ms = given.compile_ms;
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
        Kernel kq = b.jit->compile(q);
        const double g = measure_kernel(kq.fn, c, buf, quick).median_gflops;
        if (b.opt.members) fmt::print(stderr, "{} {}: {:.1f} GFLOPS\n", name, t.name(), g);
        if (g > best_g)
            best_g = g, ours.p = q, ours.method = "tile " + t.name(),
            ours.actions = looptune::format_actions(acts), ours.compile_ms = kq.compile_ms;
    }
}

/// Ours, on outputs that start as NaN so a skipped element cannot pass.
void check_ours(const Computation &c, KernelFn fn, const Buffers &inputs, const Reference &want,
                const std::string &name) {
    Buffers got = inputs;
    for (size_t t = 0; t < c.tensors.size(); ++t)
        if (c.tensors[t].kind != TensorKind::Input)
            std::fill(got.data[t].begin(), got.data[t].end(), std::nanf(""));
    int32_t cancel = 0;
    auto ptrs = got.pointers();
    fn(ptrs.data(), &cancel);
    Comparison cmp = compare_outputs(c, want, got);
    if (!cmp.ok)
        throw Error(fmt::format("{}: our schedule is wrong: {}", name, cmp.first_mismatch));
}

/// Our schedule of one benchmark against oneDNN's two layouts, alternating round by round: a
/// row of the table and of the JSON.
void bench_one(Bench &b, const std::string &file, const std::string &name) {
    // The loaded computation, held here: a schedule with `flatten` replaces p.comp.
    const ComputationPtr comp = load_program_file(file).comp;
    Ours ours(Program::naive(comp));
    const Computation &c = *comp;
    if (auto it = b.best.find(name); it != b.best.end()) {
        ours.method = it->second.method, ours.actions = it->second.actions;
        for (Action a : parse_action_csv(ours.actions, b.opt.schedules)) ours.p = apply(ours.p, a);
    }
    Buffers inputs = make_buffers(c, 1);
    const Reference want = compute_reference(c, inputs);
    if (b.opt.family) try_family(b, comp, name, inputs, ours);
    Kernel k = b.jit->compile(ours.p);
    if (!b.opt.family) ours.compile_ms = k.compile_ms;
    check_ours(c, k.fn, inputs, want, name);
    Buffers ours_buf = inputs, plain_buf = inputs, best_buf = inputs;
    lb::OnednnConv plain(c, lb::ConvLayout::Plain), bestc(c, lb::ConvLayout::Best);
    for (auto [conv, buf] : {std::pair{&plain, &plain_buf}, std::pair{&bestc, &best_buf}}) {
        conv->bind(*buf);
        conv->run();
        conv->finish();
        Comparison cmp = compare_outputs(c, want, *buf);
        if (!cmp.ok) throw Error(fmt::format("{}: oneDNN is wrong: {}", name, cmp.first_mismatch));
    }
    Side us{"ours", k.fn, [] {}, {}};
    Side sp{"plain", lb::onednn_conv_kernel, [&] { lb::set_active_conv(&plain); }, {}};
    Side sb{"best", lb::onednn_conv_kernel, [&] { lb::set_active_conv(&bestc); }, {}};
    for (int r = 0; r < b.opt.sides.rounds; ++r)
        for (auto [s, buf] :
             {std::pair{&us, &ours_buf}, std::pair{&sp, &plain_buf}, std::pair{&sb, &best_buf}}) {
            s->before();
            s->gflops.push_back(measure_kernel(s->fn, c, *buf, b.full).median_gflops);
        }
    lb::set_active_conv(nullptr);
    const double g = median(us.gflops), gp = median(sp.gflops), gb = median(sb.gflops);
    b.vs_plain.push_back(g / gp), b.vs_best.push_back(g / gb);
    fmt::print(
        "| {} | {:.2f} | {:.1f} | {:.0f}% | {:.1f} | {:.1f} | {:.2f} | {:.2f} | "
        "{:.1f} | {}: {} | {}; {} ({}) |\n",
        name, c.flops() / 1e9, g, 100 * g / b.peak, gp, gb, g / gp, g / gb, ours.compile_ms,
        ours.method, ours.actions.empty() ? "naive" : ours.actions, plain.implementation(),
        bestc.implementation(), bestc.layouts());
    std::fflush(stdout);
    b.out["rows"].push_back({{"benchmark", name},
                             {"method", ours.method},
                             {"actions", ours.actions},
                             {"compile_ms", ours.compile_ms},
                             {"ours_gflops", us.gflops},
                             {"onednn_plain_gflops", sp.gflops},
                             {"onednn_best_gflops", sb.gflops},
                             {"onednn_plain_impl", plain.implementation()},
                             {"onednn_best_impl", bestc.implementation()},
                             {"onednn_best_layouts", bestc.layouts()}});
}

/// The names of a comma-separated list (none: every benchmark).
std::vector<std::string> names_of(const std::string &list) {
    std::vector<std::string> wanted;
    for (std::string rest = list; !rest.empty();) {
        const size_t pos = rest.find(',');
        wanted.push_back(rest.substr(0, pos));
        rest = pos == std::string::npos ? "" : rest.substr(pos + 1);
    }
    return wanted;
}

void run(Options &opt) {
    Bench b(opt);
    start(b);
    const std::vector<std::string> wanted = names_of(opt.only);
    for (const auto &file :
         looptune::Dataset::load(opt.dataset).files(looptune::parse_split(opt.split))) {
        const std::string name = fs::path(file).filename().string();
        if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), name) == wanted.end())
            continue;
        bench_one(b, file, name);
    }
    fmt::print(
        "\ngeomean over {} benchmarks: ours / oneDNN plain {:.2f}, ours / oneDNN best "
        "{:.2f}\n",
        b.vs_plain.size(), geomean(b.vs_plain), geomean(b.vs_best));
    b.out["geomean_vs_plain"] = geomean(b.vs_plain);
    b.out["geomean_vs_best"] = geomean(b.vs_best);
    if (!opt.sides.json_path.empty())
        write_file_atomically(opt.sides.json_path, b.out.dump(2) + "\n");
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Side-by-side conv2d benchmark: our JIT's schedules vs oneDNN's convolution"};
    Options opt;
    add_options(app, opt);
    CLI11_PARSE(app, argc, argv);
    try {
        run(opt);
    } catch (const std::exception &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
    return 0;
}
