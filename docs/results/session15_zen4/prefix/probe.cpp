// Scratch probe (not built): a schedule measured whole and on prefixes (looptool/prefix.h).
// Built against build/ by hand: g++ -O2 -std=gnu++20 -DFMT_SHARED -I. probe.cpp with the
// agents, env and looptool archives, libfmt and libLLVM.
// Scratch: a schedule measured whole and on prefixes of r iterations, full protocol, alternating.
#include <fmt/format.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include "agents/tile_schedules.h"
#include "looptool/actions.h"
#include "looptool/interpreter.h"
#include "looptool/jit.h"
#include "looptool/measure.h"
#include "looptool/memory.h"
#include "looptool/prefix.h"
using namespace looptool;
int main(int argc, char **argv) {
    int64_t m = atol(argv[1]), n = atol(argv[2]), k = atol(argv[3]);
    std::string file = argv[4];
    pin_to_core(1);
    auto comp = std::make_shared<Computation>(make_matmul(m, n, k));
    auto jit = Jit::create();
    std::ifstream in(file);
    std::string line;
    MeasureOptions o{.warmup = 1, .min_runs = 3, .min_time_s = 0.02, .time_cap_s = 30};
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        auto colon = line.find(':');
        std::string name = line.substr(0, colon), acts = line.substr(colon + 1);
        Program p = Program::naive(comp);
        std::stringstream ss(acts);
        std::string a;
        while (std::getline(ss, a, ',')) {
            a.erase(0, a.find_first_not_of(' '));
            p = apply(p, *parse_action(a));
        }
        Buffers buf = make_buffers(*p.comp, 1);
        Kernel kw = jit->compile(p);
        std::vector<int64_t> rs = {2, 4, 8};
        std::vector<std::vector<double>> g(rs.size() + 1);
        std::vector<std::optional<OuterPrefix>> pre;
        std::vector<Kernel> ks;
        for (auto r : rs) {
            pre.push_back(outer_prefix(p, r));
            if (pre.back())
                ks.push_back(jit->compile(pre.back()->program));
            else
                ks.push_back(kw);
        }
        for (int round = 0; round < 3; ++round) {
            g[0].push_back(measure_kernel(kw.fn, *p.comp, buf, o).median_gflops);
            for (size_t i = 0; i < rs.size(); ++i)
                if (pre[i])
                    g[i + 1].push_back(
                        measure_kernel(ks[i].fn, *pre[i]->program.comp, buf, o).median_gflops);
        }
        auto med = [](std::vector<double> v) {
            if (v.empty()) return 0.0;
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        fmt::print("{:28s} whole {:6.1f}", name, med(g[0]));
        for (size_t i = 0; i < rs.size(); ++i)
            if (pre[i])
                fmt::print(" | r{} ({}/{} of var {}{}) {:6.1f}", rs[i], pre[i]->elements,
                           pre[i]->extent, comp->vars[pre[i]->var].name,
                           pre[i]->has_fixed_work ? " F" : "", med(g[i + 1]));
        fmt::print("\n");
        fflush(stdout);
    }
}
