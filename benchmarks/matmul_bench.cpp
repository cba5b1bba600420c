// Side-by-side matmul benchmarks (docs/results.md), single-threaded and pinned:
//   naive: the naive nest through our JIT vs. the same i-k-j nest compiled by g++ -O3
//          -march=native;
//   best:  the best schedule of a small family reachable with the `full` action space
//          (tile_schedules.h) vs. oneDNN's sgemm and OpenBLAS sgemm (each on 1 thread,
//          OpenBLAS with SkylakeX kernels; for M = 1, cblas_sgemv: reference_kernels.h);
//   given: (--schedules FILE) every schedule of FILE and oneDNN's sgemm, all in one alternating
//          round after round, so that near-ties are ranked on the same machine state.
// Every kernel is checked once against the reference interpreter before it is timed. Ratios
// come from measurements taken in the same run, alternating the two sides round by round.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "baselines/reference_kernels.h"
#include "baselines/side_by_side.h"
#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"
#include "looptool/measure/traffic.h"
#include "search/tile_schedules.h"
#include "util/stats.h"

using looptune::geomean;
using looptune::median;

using namespace looptool;
namespace lb = looptune::bench;

namespace {

// The 25 LoopTune test benchmarks (results/test.csv), then the two square shapes.
const char *kTestShapes[] = {
    "mm112_208_256", "mm112_224_128", "mm112_256_64",  "mm112_256_80",  "mm128_160_224",
    "mm160_224_192", "mm176_128_160", "mm176_144_160", "mm176_192_160", "mm192_192_80",
    "mm192_256_256", "mm208_128_256", "mm208_160_80",  "mm208_80_224",  "mm224_112_176",
    "mm224_208_224", "mm224_224_256", "mm224_64_240",  "mm240_208_144", "mm256_160_112",
    "mm64_240_64",   "mm80_176_224",  "mm96_160_256",  "mm96_224_240",  "mm96_240_128"};

MatmulShape parse_shape(const std::string &name) {
    MatmulShape s{};
    if (std::sscanf(name.c_str(), "mm%ld_%ld_%ld", &s.m, &s.n, &s.k) != 3 || s.m <= 0 || s.n <= 0 ||
        s.k <= 0)
        throw Error(fmt::format("bad shape '{}': expected mm{{m}}_{{n}}_{{k}}", name));
    return s;
}

std::vector<MatmulShape> shapes_for(const std::string &which) {
    std::vector<MatmulShape> v;
    if (which == "test" || which == "all")
        for (const char *n : kTestShapes) v.push_back(parse_shape(n));
    if (which == "big" || which == "all") {
        v.push_back({512, 512, 512});
        v.push_back({1024, 1024, 1024});
    }
    if (v.empty()) {  // a comma-separated list of names
        std::string rest = which;
        size_t pos;
        while (!rest.empty()) {
            pos = rest.find(',');
            v.push_back(parse_shape(rest.substr(0, pos)));
            rest = pos == std::string::npos ? "" : rest.substr(pos + 1);
        }
    }
    return v;
}

/// One shape's inputs and the reference result, computed once.
struct Case {
    MatmulShape shape;
    ComputationPtr comp;
    Buffers inputs;  // random inputs, zero outputs
    Reference want;  // of the inputs
};

Case make_case(const MatmulShape &s) {
    Case c{s, std::make_shared<const Computation>(make_matmul(s.m, s.n, s.k)), {}, {}};
    c.inputs = make_buffers(*c.comp, 1);
    c.want = compute_reference(*c.comp, c.inputs);
    return c;
}

/// Runs `fn` once on fresh inputs and compares with the reference; throws if it differs.
void verify(KernelFn fn, const Case &c, const std::string &what, double tolerance) {
    // Outputs and temporaries start as NaN, so a kernel that skips an element cannot pass.
    Buffers got = c.inputs;
    for (size_t t = 0; t < c.comp->tensors.size(); ++t)
        if (c.comp->tensors[t].kind != TensorKind::Input)
            std::fill(got.data[t].begin(), got.data[t].end(), std::nanf(""));
    int32_t cancel = 0;
    std::vector<float *> ptrs = got.pointers();
    fn(ptrs.data(), &cancel);
    Comparison cmp = compare_outputs(*c.comp, c.want, got, tolerance);
    if (!cmp.ok)
        throw Error(fmt::format("{} on {}: wrong result ({} of {}): {}", what, c.shape.name(),
                                cmp.mismatches, cmp.coverage(), cmp.first_mismatch));
}

struct Side {
    std::string name;
    KernelFn fn = nullptr;
    std::vector<double> gflops;  // one median per round
    double cv = 0;
    bool timed_out = false;
};

/// Alternates the sides for `rounds` rounds (a, b, a, b, ...) so that slow phases of the
/// shared machine hit all; each side's figure is the median of its per-round medians.
void side_by_side(const std::vector<Side *> &sides, const Case &c, const MeasureOptions &o,
                  int rounds) {
    Buffers buf = c.inputs;
    const auto shape = lb::Shape{c.shape.m, c.shape.n, c.shape.k};
    for (int r = 0; r < rounds; ++r)
        for (Side *s : sides) {
            lb::set_reference_shape(shape);
            Measurement m = measure_kernel(s->fn, *c.comp, buf, o);
            s->gflops.push_back(m.median_gflops);
            s->cv = std::max(s->cv, m.cv);
            s->timed_out = s->timed_out || m.timed_out;
        }
}

struct Row {
    std::string shape;
    double ours = 0, theirs = 0;
    double onednn = 0;   // `best` only: oneDNN's sgemm, the reference
    std::string detail;  // the winning schedule, for `best`
    std::string actions;
    double cv = 0;
};

void print_table(const std::string &title, const std::string &ours, const std::string &theirs,
                 const std::vector<Row> &rows, double peak, bool with_schedule) {
    fmt::print("\n### {}\n\n", title);
    // with_schedule: the `best` table, which also has oneDNN's column and ratio.
    fmt::print("| shape | {} GFLOPS | {} GFLOPS | ratio |{} % peak (ours) |{}\n", ours, theirs,
               with_schedule ? " oneDNN GFLOPS | ratio vs oneDNN |" : "",
               with_schedule ? " schedule |" : "");
    fmt::print("|---|---:|---:|---:|{}---:|{}\n", with_schedule ? "---:|---:|" : "",
               with_schedule ? "---|" : "");
    for (const auto &r : rows)
        fmt::print(
            "| {} | {:.1f} | {:.1f} | {:.2f} |{} {:.0f}% |{}\n", r.shape, r.ours, r.theirs,
            r.ours / r.theirs,
            with_schedule ? fmt::format(" {:.1f} | {:.2f} |", r.onednn, r.ours / r.onednn) : "",
            100 * r.ours / peak, with_schedule ? fmt::format(" {} |", r.detail) : "");
    std::vector<double> o, t, ratio, d, dratio;
    for (const auto &r : rows)
        if (r.shape.rfind("mm", 0) == 0 && std::find(std::begin(kTestShapes), std::end(kTestShapes),
                                                     r.shape) != std::end(kTestShapes)) {
            o.push_back(r.ours), t.push_back(r.theirs), ratio.push_back(r.ours / r.theirs);
            if (with_schedule) d.push_back(r.onednn), dratio.push_back(r.ours / r.onednn);
        }
    if (!o.empty())
        fmt::print(
            "| **geomean of the {} test shapes** | **{:.1f}** | **{:.1f}** | **{:.2f}** |{} "
            "**{:.0f}%** |{}\n",
            o.size(), geomean(o), geomean(t), geomean(ratio),
            with_schedule ? fmt::format(" **{:.1f}** | **{:.2f}** |", geomean(d), geomean(dratio))
                          : "",
            100 * geomean(o) / peak, with_schedule ? " |" : "");
}

/// A schedule of a --schedules file.
struct Given {
    std::string name;
    std::vector<Action> actions;
};

std::vector<Given> read_schedules(const std::string &path) {
    std::vector<Given> v;
    std::istringstream in(read_file(path));
    std::string line;
    for (int no = 1; std::getline(in, line); ++no) {
        if (line.find_first_not_of(" \t") == std::string::npos || line[0] == '#') continue;
        const size_t colon = line.find(':');
        if (colon == std::string::npos)
            throw Error(fmt::format("{}:{}: expected `name: action,action,...`", path, no));
        try {
            v.push_back({line.substr(0, colon), parse_action_list(line.substr(colon + 1))});
        } catch (const Error &e) {
            throw Error(fmt::format("{}:{}: {}", path, no, e.what()));
        }
    }
    if (v.empty()) throw Error(fmt::format("{}: no schedule", path));
    return v;
}

/// Every given schedule that applies to `c` and oneDNN, alternating round by round.
/// With `unprefetched`, each also as that JIT compiles it (LowerOptions::prefetch_blocks off),
/// named "NAME no-prefetch".
void measure_given(const std::vector<Given> &given, const Case &c, Jit &jit, Jit *unprefetched,
                   const MeasureOptions &o, int rounds, double tolerance, nlohmann::json &out) {
    std::vector<Side> sides;
    std::vector<TrafficEstimate> traffic;  // each side's L2 traffic (none: oneDNN)
    const int64_t l2 = private_cache_bytes();
    for (const Given &g : given) {
        Program p = Program::naive(c.comp);
        try {
            for (Action a : g.actions) p = apply(p, a);
        } catch (const Error &e) {
            fmt::print("{} {}: does not apply: {}\n", c.shape.name(), g.name, e.what());
            continue;
        }
        const TrafficEstimate t = estimate_traffic(p.computation(), p.tree, l2);
        traffic.insert(traffic.end(), unprefetched ? 2 : 1, t);
        sides.push_back({g.name, jit.compile(p).fn});
        verify(sides.back().fn, c, g.name, tolerance);
        if (unprefetched) {
            sides.push_back({g.name + " no-prefetch", unprefetched->compile(p).fn});
            verify(sides.back().fn, c, sides.back().name, tolerance);
        }
    }
    sides.push_back({"oneDNN", lb::onednn_kernel});
    traffic.emplace_back();
    verify(sides.back().fn, c, "oneDNN sgemm", tolerance);
    std::vector<Side *> ptrs;
    for (Side &s : sides) ptrs.push_back(&s);
    side_by_side(ptrs, c, o, rounds);
    const double dnnl = median(sides.back().gflops);
    for (size_t i = 0; i < sides.size(); ++i) {
        const Side &s = sides[i];
        const auto [lo, hi] = std::minmax_element(s.gflops.begin(), s.gflops.end());
        fmt::print("{} {:<28} {:7.1f} GFLOPS ({:.1f}-{:.1f})  {:.3f}x oneDNN", c.shape.name(),
                   s.name, median(s.gflops), *lo, *hi, median(s.gflops) / dnnl);
        if (traffic[i].bytes > 0)
            fmt::print("  L2 traffic {:.1f}x ({:.1f}x from the shared L3)", traffic[i].ratio(),
                       traffic[i].shared_cache_ratio());
        fmt::print("\n");
        nlohmann::json j{{"shape", c.shape.name()}, {"schedule", s.name}, {"gflops", s.gflops}};
        if (traffic[i].bytes > 0) {
            j["l2_traffic_ratio"] = traffic[i].ratio();
            j["shared_cache_ratio"] = traffic[i].shared_cache_ratio();
        }
        out["given"].push_back(j);
    }
    std::fflush(stdout);
}

struct Options {
    std::string suite = "all", shapes = "all", coretype = "SkylakeX";
    lb::SideBySide sides;
    double tolerance = 1;
    bool list_family = false, layout = false, compare_prefetch = false, traffic = false;
    std::string schedules_path;
};

void add_options(CLI::App &app, Options &o) {
    app.add_option("--suite", o.suite, "naive, best or all");
    app.add_option("--shapes", o.shapes,
                   "test (25 LoopTune test shapes), big (512^3, 1024^3), all, "
                   "or a list mm{m}_{n}_{k},...");
    o.sides.add_options(app);
    app.add_option("--tolerance", o.tolerance,
                   "Factor on the verification's forward error bound (docs/measurement.md)");
    app.add_option("--openblas-coretype", o.coretype, "OPENBLAS_CORETYPE to load OpenBLAS with");
    app.add_flag("--list-family", o.list_family, "Print the schedule family's action sequences");
    app.add_flag("--traffic", o.traffic,
                 "With --list-family: each member's estimated traffic beyond L2 "
                 "(looptool/measure/traffic.h) instead of its actions");
    app.add_flag("--compare-prefetch", o.compare_prefetch,
                 "With --schedules: each schedule also compiled without the lowering's block "
                 "prefetches (NAME no-prefetch), side by side");
    app.add_flag("--layout", o.layout,
                 "The family with the layout actions too (members with B packed)");
    app.add_option(
           "--schedules", o.schedules_path,
           "Measure these schedules (lines `name: action,action,...`, layout actions "
           "allowed, # comments) and oneDNN side by side on every shape, instead of a suite")
        ->check(CLI::ExistingFile);
}

/// What every shape's benchmark uses: the protocols, the JITs, the peak, and the results.
struct Bench {
    explicit Bench(Options &o) : opt(o) {}
    Options &opt;  // sides.start() pins and records the core
    std::vector<Given> given;
    MeasureOptions full, quick;
    std::unique_ptr<Jit> jit, unprefetched;
    double peak = 0;
    nlohmann::json out;
    std::vector<Row> naive_rows, best_rows;
};

/// Loads the libraries, pins, measures the peak and prints the protocol.
void start(Bench &b) {
    b.given =
        b.opt.schedules_path.empty() ? std::vector<Given>{} : read_schedules(b.opt.schedules_path);
    // First, before anything could load OpenBLAS with the environment's core type.
    lb::load_openblas(b.opt.coretype);
    lb::load_onednn();
    b.full = b.opt.sides.start(10);
    const int core = b.opt.sides.core;
    b.jit = Jit::create();
    JitOptions no_prefetch;
    no_prefetch.lower.prefetch_blocks = false;
    b.unprefetched = b.opt.compare_prefetch ? Jit::create(no_prefetch) : nullptr;
    b.quick = b.opt.sides.quick(0.02, 2);
    b.peak = measure_peak_gflops(0.3).gflops;

    fmt::print("# matmul benchmarks\n\ncpu: {} ({}), core {}, JIT target {}\n", cpu_model_name(),
               b.jit->host_cpu(), core, "host");
    fmt::print("OpenBLAS: core {} ({})\n", lb::openblas_core(), lb::openblas_config());
    fmt::print("{}\n", lb::onednn_version());
    fmt::print("peak (FMA chains, measured now): {:.1f} GFLOPS\n", b.peak);
    fmt::print(
        "protocol: {} warm-ups, median of >= {} calls and >= {} s, {} alternating "
        "rounds, median of rounds\n",
        b.full.warmup, b.full.min_runs, b.full.min_time_s, b.opt.sides.rounds);

    b.out["cpu"] = cpu_model_name();
    b.out["jit_cpu"] = b.jit->host_cpu();
    b.out["openblas_core"] = lb::openblas_core();
    b.out["onednn"] = lb::onednn_version();
    b.out["peak_gflops"] = b.peak;
    b.out["rounds"] = b.opt.sides.rounds;
}

/// --list-family: each member's actions (or, with --traffic, its estimated traffic).
void list_family(const Options &opt, const Case &c) {
    const MatmulShape &s = c.shape;
    for (const auto &t : looptune::schedule_family(s.m, s.n, s.k, opt.layout)) {
        try {
            const auto actions = looptune::tile_actions(*c.comp, t);
            if (opt.traffic) {
                Program p = Program::naive(c.comp);
                for (Action a : actions) p = apply(p, a);
                const TrafficEstimate e = estimate_traffic(*p.comp, p.tree, private_cache_bytes());
                fmt::print(
                    "{} {}: L2 traffic {:.2f}x, {:.2f}x read again in short runs beyond a share "
                    "of L3\n",
                    s.name(), t.name(), e.ratio(), e.shared_cache_ratio());
                continue;
            }
            fmt::print("{} {}: {}\n", s.name(), t.name(), looptune::format_actions(actions));
        } catch (const Error &e) {
            fmt::print("{} {}: not reachable: {}\n", s.name(), t.name(), e.what());
        }
    }
}

/// The `naive` suite on one shape: our JIT's naive nest against g++'s i-k-j nest.
void bench_naive(Bench &b, const Case &c) {
    Program p = Program::naive(c.comp);
    Side ours{"jit naive", b.jit->compile(p).fn}, gcc{"g++ ikj", lb::naive_ikj_kernel};
    verify(ours.fn, c, "JIT naive nest", b.opt.tolerance);
    verify(gcc.fn, c, "g++ naive i-k-j", b.opt.tolerance);
    side_by_side({&ours, &gcc}, c, b.full, b.opt.sides.rounds);
    Row r{c.shape.name(),           median(ours.gflops), median(gcc.gflops), 0, "", "",
          std::max(ours.cv, gcc.cv)};
    fmt::print("naive {}: jit {:.1f}  g++ {:.1f}  ratio {:.2f}\n", r.shape, r.ours, r.theirs,
               r.ours / r.theirs);
    std::fflush(stdout);
    b.naive_rows.push_back(r);
    b.out["naive"].push_back(
        {{"shape", r.shape}, {"jit_gflops", ours.gflops}, {"gcc_gflops", gcc.gflops}});
}

/// The family's fastest member on `c` by the short protocol; every member's figure (or why it
/// does not apply) goes into `tried`.
struct FamilyBest {
    double gflops = -1;
    looptune::TileSchedule schedule;
    std::vector<Action> actions;
    KernelFn fn = nullptr;
};

FamilyBest search_family(Bench &b, const Case &c, nlohmann::json &tried) {
    const MatmulShape &s = c.shape;
    FamilyBest best;
    for (const auto &t : looptune::schedule_family(s.m, s.n, s.k, b.opt.layout)) {
        std::vector<Action> actions;
        try {
            actions = looptune::tile_actions(*c.comp, t);
        } catch (const Error &e) {
            tried.push_back({{"schedule", t.name()}, {"error", e.what()}});
            continue;
        }
        Program p = Program::naive(c.comp);
        for (Action a : actions) p = apply(p, a);
        Kernel k = b.jit->compile(p);
        verify(k.fn, c, "schedule " + t.name(), b.opt.tolerance);
        Buffers buf = c.inputs;
        Measurement m = measure_kernel(k.fn, *c.comp, buf, b.quick);
        tried.push_back(
            {{"schedule", t.name()}, {"gflops", m.median_gflops}, {"compile_ms", k.compile_ms}});
        if (m.median_gflops > best.gflops) best = {m.median_gflops, t, actions, k.fn};
    }
    if (!best.fn) throw Error(fmt::format("{}: no schedule of the family applies", s.name()));
    return best;
}

/// The `best` suite on one shape: search the family with a short protocol, then time the winner
/// side by side with OpenBLAS and oneDNN.
void bench_best(Bench &b, const Case &c) {
    nlohmann::json tried = nlohmann::json::array();
    const FamilyBest best = search_family(b, c, tried);
    Side ours{"jit best", best.fn}, blas{"OpenBLAS", lb::openblas_kernel},
        dnnl{"oneDNN", lb::onednn_kernel};
    verify(blas.fn, c, "OpenBLAS sgemm", b.opt.tolerance);
    verify(dnnl.fn, c, "oneDNN sgemm", b.opt.tolerance);
    side_by_side({&ours, &blas, &dnnl}, c, b.full, b.opt.sides.rounds);
    Row r{c.shape.name(),
          median(ours.gflops),
          median(blas.gflops),
          median(dnnl.gflops),
          best.schedule.name(),
          looptune::format_actions(best.actions),
          std::max({ours.cv, blas.cv, dnnl.cv})};
    fmt::print(
        "best {}: jit {:.1f} ({})  OpenBLAS {:.1f}  oneDNN {:.1f}  ratio vs oneDNN "
        "{:.2f}\n",
        r.shape, r.ours, r.detail, r.theirs, r.onednn, r.ours / r.onednn);
    std::fflush(stdout);
    b.best_rows.push_back(r);
    b.out["best"].push_back({{"shape", r.shape},
                             {"schedule", r.detail},
                             {"actions", r.actions},
                             {"jit_gflops", ours.gflops},
                             {"openblas_gflops", blas.gflops},
                             {"onednn_gflops", dnnl.gflops},
                             {"family", tried}});
}

/// The tables of both suites, the winning action sequences, and the JSON file.
void report(const Bench &b) {
    if (!b.naive_rows.empty())
        print_table("naive nest: our JIT vs g++ -O3 -march=native (i-k-j)", "JIT", "g++",
                    b.naive_rows, b.peak, false);
    if (!b.best_rows.empty()) {
        print_table("best schedule of the family vs OpenBLAS and oneDNN sgemm (1 thread each)",
                    "JIT best", "OpenBLAS", b.best_rows, b.peak, true);
        fmt::print("\nwinning action sequences:\n");
        for (const auto &r : b.best_rows)
            fmt::print("- {} ({}): {}\n", r.shape, r.detail, r.actions);
    }
    if (!b.opt.sides.json_path.empty())
        write_file_atomically(b.opt.sides.json_path, b.out.dump(2) + "\n");
}

void run(Options &opt) {
    Bench b(opt);
    start(b);
    for (const MatmulShape &s : shapes_for(opt.shapes)) {
        Case c = make_case(s);
        lb::set_reference_shape({s.m, s.n, s.k});
        if (opt.list_family) {
            list_family(opt, c);
        } else if (!b.given.empty()) {
            measure_given(b.given, c, *b.jit, b.unprefetched.get(), b.full, opt.sides.rounds,
                          opt.tolerance, b.out);
        } else {
            if (opt.suite == "naive" || opt.suite == "all") bench_naive(b, c);
            if (opt.suite == "best" || opt.suite == "all") bench_best(b, c);
        }
    }
    if (!opt.list_family) report(b);
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Side-by-side matmul benchmarks: our JIT vs g++ (naive) and OpenBLAS (best)"};
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
