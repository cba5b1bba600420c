// A scratch probe of 2026-11-26 (docs/performance.md (ab)), kept as the record of how its figures
// were made: built as a temporary target of benchmarks/CMakeLists.txt
// (add_executable(alias_probe alias_probe.cpp), linked to looptune_bench_support), then removed.
// Scratch: does where A, B and C start within a 4 KB page change a kernel's speed?
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "benchmarks/reference_kernels.h"
#include "looptool/actions.h"
#include "looptool/interpreter.h"
#include "looptool/ir.h"
#include "looptool/jit.h"
#include "looptool/loop_tree.h"
#include "looptool/measure.h"

using namespace looptool;
namespace lb = looptune::bench;

int main(int argc, char **argv) {
    if (argc < 5) {
        fmt::print(stderr, "usage: alias_probe M N K SCHEDULES_FILE [rounds]\n");
        return 2;
    }
    const int64_t m = atol(argv[1]), n = atol(argv[2]), k = atol(argv[3]);
    const int rounds = argc > 5 ? atoi(argv[5]) : 5;
    pin_to_core(-1);
    lb::load_onednn();
    auto comp = std::make_shared<const Computation>(make_matmul(m, n, k));
    Buffers base = make_buffers(*comp, 1);
    auto jit = Jit::create();
    struct S {
        std::string name;
        KernelFn fn;
    };
    std::vector<S> sides;
    std::ifstream in(argv[4]);
    for (std::string line; std::getline(in, line);) {
        auto c = line.find(':');
        if (line.empty() || line[0] == '#' || c == std::string::npos) continue;
        Program p = Program::naive(comp);
        std::stringstream ss(line.substr(c + 1));
        for (std::string a; std::getline(ss, a, ',');) {
            a.erase(std::remove(a.begin(), a.end(), ' '), a.end());
            p = apply(p, *parse_action(a));
        }
        sides.push_back({line.substr(0, c), jit->compile(p).fn});
    }
    sides.push_back({"oneDNN", lb::onednn_kernel});
    lb::set_reference_shape({m, n, k});
    // One arena; each tensor at 1 MB-aligned slot + its offset.
    const size_t nb = base.data.size();
    std::vector<size_t> bytes(nb);
    size_t slot = 0;
    for (size_t t = 0; t < nb; ++t)
        bytes[t] = base.data[t].size() * 4, slot = std::max(slot, bytes[t]);
    slot = (slot + (8 << 20)) / (2 << 20) * (2 << 20);
    float *arena = static_cast<float *>(std::aligned_alloc(2 << 20, slot * nb));
    std::memset(arena, 0, slot * nb);
    std::vector<std::vector<size_t>> configs = {{0, 0, 0},      {0, 1024, 2048}, {0, 2048, 1024},
                                                {0, 0, 2048},   {0, 2048, 2048}, {1024, 2048, 3072},
                                                {64, 192, 320}, {0, 64, 128}};
    MeasureOptions o;
    o.warmup = 2;
    o.min_runs = 10;
    o.min_time_s = 0.05;
    std::vector<std::vector<std::vector<double>>> g(configs.size(),
                                                    std::vector<std::vector<double>>(sides.size()));
    for (int r = 0; r < rounds; ++r)
        for (size_t ci = 0; ci < configs.size(); ++ci) {
            std::vector<float *> ptrs(nb);
            for (size_t t = 0; t < nb; ++t) {
                size_t off = t < 3 ? configs[ci][t] : 0;
                ptrs[t] =
                    reinterpret_cast<float *>(reinterpret_cast<char *>(arena) + t * slot + off);
                std::memcpy(ptrs[t], base.data[t].data(), bytes[t]);
            }
            Buffers b;  // measure_kernel needs Buffers: time by hand instead
            for (size_t s = 0; s < sides.size(); ++s) {
                int32_t cancel = 0;
                std::vector<double> ts;
                for (int w = 0; w < 3; ++w) sides[s].fn(ptrs.data(), &cancel);
                auto t0 = std::chrono::steady_clock::now();
                double total = 0;
                while ((int)ts.size() < 10 || total < 0.05) {
                    auto a = std::chrono::steady_clock::now();
                    sides[s].fn(ptrs.data(), &cancel);
                    double d =
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
                    ts.push_back(d);
                    total += d;
                }
                (void)t0;
                std::sort(ts.begin(), ts.end());
                g[ci][s].push_back(comp->flops() / ts[ts.size() / 2] / 1e9);
            }
        }
    for (size_t ci = 0; ci < configs.size(); ++ci) {
        fmt::print("offsets A {:4} B {:4} C {:4}:", configs[ci][0], configs[ci][1], configs[ci][2]);
        for (size_t s = 0; s < sides.size(); ++s) {
            auto v = g[ci][s];
            std::sort(v.begin(), v.end());
            fmt::print("  {} {:.1f}", sides[s].name, v[v.size() / 2]);
        }
        fmt::print("\n");
    }
}
