// Thread scaling of the tool's own matmul kernels (docs/measurement.md, threads): per shape,
// our kernel on one thread and our kernel on N threads, side by side in one process, measured
// again in alternating rounds; the ratio of the medians is the scaling. The kernels are `tune`'s
// (the guided search with the policy for that thread count, each verified against the
// reference) or, with --kernels seeds, the fastest seed (search/seeds.h) without and with
// `parallel`. Other processes may load the machine: the rounds alternate so that a disturbance
// falls on both.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/environment.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "search/seeds.h"
#include "tune/guided_search.h"
#include "tune/policy.h"
#include "util/stats.h"

using namespace looptool;

namespace {

struct Best {
    std::string name;
    Program program;
    double gflops = 0;
    std::vector<Action> actions;  // from the naive nest
};

Program apply_seed(const Program &naive, const looptune::TuneSeed &s) {
    Program p = naive;
    for (Action a : s.actions) p = apply(p, a);
    return p;
}

double gflops(Jit &jit, const Program &p, Buffers &b, const MeasureOptions &o) {
    return measure_kernel(jit.compile(p).fn, p.computation(), b, o).median_gflops;
}

// The fastest seed of those with (`parallel`) or without the mark, measured once each.
Best fastest_seed(Jit &jit, const Program &naive, bool parallel, Buffers &b,
                  const MeasureOptions &o, int threads) {
    Best best;
    const auto seeds = looptune::tune_seeds(naive.computation(), looptune::kSeedSteps,
                                            ActionSpace::preset("full"), false, threads);
    for (const auto &s : seeds) {
        if ((s.name.find(" parallel") != std::string::npos) != parallel) continue;
        const Program p = apply_seed(naive, s);
        const double g = gflops(jit, p, b, o);
        if (g > best.gflops) best = {s.name, p, g, s.actions};
    }
    if (best.name.empty()) throw Error(fmt::format("{}: no seed", naive.computation().name));
    return best;
}

// `tune`'s kernel on `threads` threads: the guided search with that thread count's policy, in
// a fresh environment (no store, no schedule library), verified against the reference.
Best tuned(const Program &naive, int threads, double budget_s) {
    const looptune::Policy policy = looptune::Policy::load(looptune::default_policy_path(threads));
    looptune::EnvConfig base;
    base.threads = threads;
    looptune::Environment env(policy.env_config(base));
    looptune::GuidedConfig g;
    g.budget_s = budget_s;
    const looptune::GuidedResult r = looptune::guided_search(policy, env, naive, g);
    const Comparison cmp = env.verify(r.best);
    if (!cmp.ok)
        throw Error(fmt::format("{}: the {}-thread kernel failed verification: {}",
                                naive.computation().name, threads, cmp.first_mismatch));
    const bool parallel = dump(r.best).find("parallel") != std::string::npos;
    return {(r.found_by.empty() ? "start" : r.found_by) + (parallel ? "" : ", not parallel"),
            r.best, r.best_gflops, r.actions};
}

struct Options {
    std::vector<std::string> shapes, files;
    std::string dataset, kernels = "tuned", out;
    double min_mflop = 64, budget_s = 0.5;
    int threads = 2, rounds = 7;
};

// The naive programs to measure: --matmul shapes, then the matmul files (given, or a dataset's)
// of at least --min-mflop.
std::vector<Program> programs(const Options &o) {
    std::vector<Program> out;
    for (const std::string &shape : o.shapes) {
        int64_t m = 0, n = 0, k = 0;
        if (std::sscanf(shape.c_str(), "%ldx%ldx%ld", &m, &n, &k) != 3 || m < 1 || n < 1 || k < 1)
            throw Error(fmt::format("--matmul {}: expected MxNxK, each at least 1", shape));
        out.push_back(Program::naive(std::make_shared<Computation>(make_matmul(m, n, k))));
    }
    std::vector<std::string> files = o.files;
    if (!o.dataset.empty())
        for (const std::string &f : looptune::Dataset::load(o.dataset).files(looptune::Split::All))
            files.push_back(f);
    for (const std::string &f : files) {
        const Program p = tuning_start(load_program_file(f));
        if (!looptune::matmul_shape(p.computation()) || p.computation().flops() < o.min_mflop * 1e6)
            continue;
        out.push_back(p);
    }
    if (out.empty()) throw Error("no matmul to measure (--matmul, --bench, --dataset)");
    return out;
}

struct Row {
    std::string name, one, many;
    double mflop = 0, g1 = 0, gn = 0;
    double t1 = 0, tn = 0;  // the kernels' figures where they were chosen (tune's or the seeds')
    std::string actions;    // the N-thread kernel's, from the naive nest
};

Row measure(const Options &o, Jit &jit1, Jit &jitn, const Program &naive) {
    Buffers b = make_buffers(naive.computation(), 1);
    MeasureOptions mo;
    Best s, p;
    if (o.kernels == "seeds") {
        s = fastest_seed(jit1, naive, false, b, mo, o.threads);
        p = fastest_seed(jitn, naive, true, b, mo, o.threads);
    } else {
        s = tuned(naive, 1, o.budget_s);
        p = tuned(naive, o.threads, o.budget_s);
    }
    std::vector<double> g1, gn;
    for (int r = 0; r < o.rounds; ++r) {
        g1.push_back(gflops(jit1, s.program, b, mo));
        gn.push_back(gflops(jitn, p.program, b, mo));
    }
    return {naive.computation().name,
            s.name,
            p.name,
            naive.computation().flops() * 1e-6,
            looptune::median(g1),
            looptune::median(gn),
            s.gflops,
            p.gflops,
            fmt::format("{}", fmt::join(action_names(p.actions), " "))};
}

std::string table(const Options &o, const std::vector<Row> &rows) {
    std::string s = fmt::format(
        "{} kernels; cpu: {}; peak {:.1f} GFLOPS per core; 1 thread against {} threads, {} "
        "alternating rounds (medians)\n\n| benchmark | MFLOP | 1 thread GFLOPS | {} threads "
        "GFLOPS | scaling | 1-thread kernel | {}-thread kernel |\n|---|---|---|---|---|---|---|\n",
        o.kernels, cpu_model_name(), max_gflops(), o.threads, o.rounds, o.threads, o.threads);
    std::vector<double> ratios;
    for (const Row &r : rows) {
        ratios.push_back(r.gn / r.g1);
        s += fmt::format("| {} | {:.1f} | {:.1f} | {:.1f} | {:.2f}x | {} | {} |\n", r.name, r.mflop,
                         r.g1, r.gn, r.gn / r.g1, r.one, r.many);
    }
    return s + fmt::format("\n{} matmuls: geomean scaling {:.2f}x, lowest {:.2f}x\n", rows.size(),
                           looptune::geomean(ratios),
                           *std::min_element(ratios.begin(), ratios.end()));
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Thread scaling of our matmul kernels: N threads against 1, side by side"};
    Options o;
    app.add_option("--matmul", o.shapes, "Shapes MxNxK");
    app.add_option("--bench", o.files, "Benchmark files")->check(CLI::ExistingFile);
    app.add_option("--dataset", o.dataset, "Every benchmark file of this directory")
        ->check(CLI::ExistingDirectory);
    app.add_option("--min-mflop", o.min_mflop, "Files' matmuls of fewer MFLOP are left out")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--kernels", o.kernels, "tuned (tune's guided search) or seeds")
        ->check(CLI::IsMember({"tuned", "seeds"}))
        ->capture_default_str();
    app.add_option("--budget-s", o.budget_s, "Tuning budget per kernel (tuned)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--threads", o.threads, "Threads of the parallel kernels")
        ->check(CLI::Range(2, 1024))
        ->capture_default_str();
    app.add_option("--rounds", o.rounds, "Alternating rounds")->check(CLI::Range(1, 1000));
    app.add_option("--out", o.out, "Also write the table to this Markdown file");
    CLI11_PARSE(app, argc, argv);
    try {
        if (o.shapes.empty() && o.files.empty() && o.dataset.empty())
            o.shapes = {"256x256x512", "512x512x512", "384x768x768", "1024x1024x256"};
        const std::vector<Program> naive = programs(o);
        JitOptions one, many;
        one.threads = 1;
        many.threads = o.threads;
        auto jit1 = Jit::create(one), jitn = Jit::create(many);
        std::vector<Row> rows;
        for (const Program &p : naive) {
            rows.push_back(measure(o, *jit1, *jitn, p));
            const Row &r = rows.back();
            fmt::print(stderr,
                       "{}: {:.1f} / {:.1f} GFLOPS, {:.2f}x (where chosen: {:.1f} / {:.1f}; {})\n",
                       r.name, r.gn, r.g1, r.gn / r.g1, r.tn, r.t1, r.actions);
        }
        const std::string t = table(o, rows);
        fmt::print("{}", t);
        if (!o.out.empty()) write_file_atomically(o.out, t);
    } catch (const Error &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
    return 0;
}
