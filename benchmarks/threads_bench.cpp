// Thread scaling of the tool's own matmul kernels (docs/measurement.md, threads): per shape,
// every seed (search/seeds.h) on one thread and every `parallel` seed on N threads, the
// fastest of each kept, then both measured again in alternating rounds; the ratio of the
// medians is the scaling. Other processes may load the machine: the rounds alternate so that a
// disturbance falls on both.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "search/seeds.h"
#include "util/stats.h"

using namespace looptool;

namespace {

struct Best {
    std::string name;
    Program program;
    double gflops = 0;
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
Best fastest(Jit &jit, const Program &naive, bool parallel, Buffers &b, const MeasureOptions &o,
             int threads) {
    Best best;
    const auto seeds = looptune::tune_seeds(naive.computation(), looptune::kSeedSteps,
                                            ActionSpace::preset("full"), false, threads);
    for (const auto &s : seeds) {
        if ((s.name.find(" parallel") != std::string::npos) != parallel) continue;
        const Program p = apply_seed(naive, s);
        const double g = gflops(jit, p, b, o);
        if (g > best.gflops) best = {s.name, p, g};
    }
    if (best.name.empty()) throw Error(fmt::format("{}: no seed", naive.computation().name));
    return best;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Thread scaling of the seeds' matmul kernels: N threads against 1"};
    std::vector<std::string> shapes{"256x256x512", "512x512x512", "384x768x768", "1024x1024x256"};
    int threads = 2, rounds = 7;
    app.add_option("--matmul", shapes, "Shapes MxNxK")->capture_default_str();
    app.add_option("--threads", threads, "Threads of the parallel kernels")
        ->check(CLI::Range(2, 1024))
        ->capture_default_str();
    app.add_option("--rounds", rounds, "Alternating rounds")->check(CLI::Range(1, 1000));
    CLI11_PARSE(app, argc, argv);
    try {
        JitOptions one, many;
        one.threads = 1;
        many.threads = threads;
        auto jit1 = Jit::create(one), jitn = Jit::create(many);
        MeasureOptions o;
        fmt::print("cpu: {}; peak {:.1f} GFLOPS per core; {} threads, {} rounds\n",
                   cpu_model_name(), max_gflops(), threads, rounds);
        std::vector<double> ratios;
        for (const std::string &shape : shapes) {
            int64_t m = 0, n = 0, k = 0;
            if (std::sscanf(shape.c_str(), "%ldx%ldx%ld", &m, &n, &k) != 3)
                throw Error(fmt::format("--matmul {}: expected MxNxK", shape));
            const Program naive =
                Program::naive(std::make_shared<Computation>(make_matmul(m, n, k)));
            Buffers b = make_buffers(naive.computation(), 1);
            const Best s = fastest(*jit1, naive, false, b, o, threads);
            const Best p = fastest(*jitn, naive, true, b, o, threads);
            std::vector<double> g1, gn;
            for (int r = 0; r < rounds; ++r) {
                g1.push_back(gflops(*jit1, s.program, b, o));
                gn.push_back(gflops(*jitn, p.program, b, o));
            }
            const double a = looptune::median(g1), c = looptune::median(gn);
            ratios.push_back(c / a);
            fmt::print(
                "{:>14} {:6.1f} MFLOP  1 thread {:6.1f} GFLOPS ({})  {} threads {:6.1f} "
                "GFLOPS ({})  {:.2f}x\n",
                shape, 2e-6 * double(m * n * k), a, s.name, threads, c, p.name, c / a);
        }
        fmt::print("geomean scaling {:.2f}x\n", looptune::geomean(ratios));
    } catch (const Error &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
    return 0;
}
