// Scratch probe (not built; built by hand against build/ like ../prefix/probe.cpp).
// Scratch: register tiles the action set cannot express (tm, tn not powers of two), built by
// editing an 8x32 tile's loop sizes, verified, and measured beside power-of-two tiles.
#include <fmt/format.h>
#include <algorithm>
#include <cstdio>
#include "agents/tile_schedules.h"
#include "looptool/actions.h"
#include "looptool/interpreter.h"
#include "looptool/jit.h"
#include "looptool/measure.h"
#include "looptool/memory.h"
#include "looptool/verify.h"
using namespace looptool;
Program tile(ComputationPtr c, int tm, int tn, const char *outer) {
    int btm = tm, btn = tn;
    while (btm & (btm - 1)) ++btm;  // a power of two to build from
    while (btn & (btn - 1)) ++btn;
    Program p = Program::naive(c);
    for (Action a : looptune::tile_actions(*c, looptune::TileSchedule{btm, btn, 0, outer}))
        p = apply(p, a);
    Nest &n = p.tree.nests[0];
    const int M = c->var_index("m"), N = c->var_index("n");
    for (int v : {M, N}) {
        const int64_t t = v == M ? tm : tn, E = c->vars[v].extent;
        int outer_d = -1, inner_d = -1;
        for (size_t d = 0; d < n.loops.size(); ++d)
            if (n.loops[d].var == v) (outer_d < 0 ? outer_d : inner_d) = int(d);
        n.loops[inner_d].size = t;
        n.loops[outer_d].size = E / t;
        n.loops[outer_d].tail = E % t;
    }
    validate_loop_tree(*c, p.tree);
    return p;
}
int main(int argc, char **argv) {
    int64_t m = atol(argv[1]), n = atol(argv[2]), k = atol(argv[3]);
    pin_to_core(1);
    auto c = std::make_shared<const Computation>(make_matmul(m, n, k));
    auto jit = Jit::create();
    struct T {
        int tm, tn;
        const char *o;
    };
    std::vector<T> ts = {{8, 32, "mn"},  {16, 16, "mn"}, {8, 16, "mn"}, {4, 64, "nm"},
                         {4, 64, "mn"},  {8, 48, "mn"},  {8, 48, "nm"}, {12, 32, "mn"},
                         {12, 32, "nm"}, {6, 64, "mn"},  {6, 64, "nm"}, {14, 32, "mn"},
                         {24, 16, "mn"}};
    Buffers buf = make_buffers(*c, 1);
    const Reference want = compute_reference(*c, buf);
    std::vector<Program> ps;
    std::vector<Kernel> ks;
    for (auto t : ts) {
        ps.push_back(tile(c, t.tm, t.tn, t.o));
        ks.push_back(jit->compile(ps.back()));
        Buffers got = buf;
        ks.back().fn(got.pointers().data(), nullptr);
        if (!compare_outputs(*c, want, got, 1.0).ok)
            fmt::print("{}x{} {}: WRONG\n", t.tm, t.tn, t.o);
    }
    MeasureOptions o{.warmup = 3, .min_runs = 10, .min_time_s = 0.05, .time_cap_s = 30};
    std::vector<std::vector<double>> g(ts.size());
    for (int round = 0; round < 5; ++round)
        for (size_t i = 0; i < ts.size(); ++i)
            g[i].push_back(measure_kernel(ks[i].fn, *c, buf, o).median_gflops);
    for (size_t i = 0; i < ts.size(); ++i) {
        std::sort(g[i].begin(), g[i].end());
        fmt::print("{:>3}x{:<3} {}  median {:6.1f}  (rounds {:.1f} .. {:.1f})\n", ts[i].tm,
                   ts[i].tn, ts[i].o, g[i][2], g[i][0], g[i][4]);
    }
}
