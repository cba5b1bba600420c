// The exported kernel (looptool/jit/export.h, called through its C signature from a shared
// object built by `cc`) against the JIT's kernel for the same schedule, side by side in one
// process: rounds alternate the two, each round timing `--calls` calls after a warm-up;
// GFLOPS are medians over all timed calls. Both kernels are checked against the reference
// interpreter first. Target: exported >= 0.9x the JIT.
//   taskset -c 1 build/benchmarks/export_bench
#include <fmt/format.h>

#include <dlfcn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "looptool/actions/actions.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/ir/error.h"
#include "looptool/jit/export.h"
#include "looptool/jit/jit.h"
#include "search/tile_schedules.h"
#include "util/stats.h"

using looptune::geomean;
using looptune::median;

using namespace looptool;

namespace {

using Fn3 = void (*)(const float *, const float *, float *);

struct Case {
    std::string label;
    Program program;
};

std::vector<Case> cases() {
    std::vector<Case> out;
    for (const char *shape : {"128_128_128", "256_256_256", "112_208_256"}) {
        int64_t m, n, k;
        std::sscanf(shape, "%ld_%ld_%ld", &m, &n, &k);
        auto c = std::make_shared<Computation>(make_matmul(m, n, k));
        out.push_back({fmt::format("mm{} naive", shape), Program::naive(c)});
        Program p = Program::naive(c);
        for (Action a : looptune::tile_actions(*c, looptune::TileSchedule{})) p = apply(p, a);
        out.push_back({fmt::format("mm{} 8x32 tile", shape), p});
    }
    return out;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Exported kernels (cc-built shared object) vs the JIT, same schedule"};
    int rounds = 10, calls = 20;
    app.add_option("--rounds", rounds, "Alternating rounds")->capture_default_str();
    app.add_option("--calls", calls, "Timed calls per side and round")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        const auto dir =
            std::filesystem::temp_directory_path() / fmt::format("export_bench_{}", ::getpid());
        std::filesystem::create_directories(dir);
        auto jit = Jit::create();
        fmt::print("{:<22} {:>10} {:>10} {:>7}\n", "kernel", "JIT GF/s", "export", "ratio");
        for (const Case &cs : cases()) {
            const Computation &c = cs.program.computation();
            ExportOptions opts;
            opts.name = fmt::format("kernel_{}", std::hash<std::string>{}(cs.label) % 100000);
            const ExportedKernel k = export_kernel(cs.program, opts);
            write_exported_kernel(k, dir.string());
            const std::string so = (dir / (k.name + ".so")).string();
            if (std::system(
                    fmt::format("cc -shared -o '{}' '{}'", so, (dir / (k.name + ".o")).string())
                        .c_str()) != 0)
                throw Error("cc -shared failed");
            void *lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (!lib) throw Error(fmt::format("dlopen {}: {}", so, dlerror()));
            void *sym = dlsym(lib, k.name.c_str());
            KernelFn jfn = jit->compile(cs.program).fn;

            Buffers b = make_buffers(c, 1);
            const Reference want = compute_reference(c, b);
            std::vector<float *> ptrs = b.pointers(), args;
            for (TensorKind kind : {TensorKind::Input, TensorKind::Output})
                for (size_t t = 0; t < c.tensors.size(); ++t)
                    if (c.tensors[t].kind == kind) args.push_back(ptrs[t]);
            if (args.size() != 3) throw Error("export_bench handles matmuls (three tensors) only");
            auto call_export = [&] { reinterpret_cast<Fn3>(sym)(args[0], args[1], args[2]); };
            auto call_jit = [&] { jfn(ptrs.data(), nullptr); };
            for (auto &[name, call] :
                 {std::pair<const char *, std::function<void()>>{"JIT", call_jit},
                  {"export", call_export}}) {
                call();
                Comparison r = compare_outputs(c, want, b);
                if (!r.ok)
                    throw Error(
                        fmt::format("{} {}: wrong result: {}", cs.label, name, r.first_mismatch));
            }
            std::vector<double> tj, te;
            auto time = [&](const std::function<void()> &f, std::vector<double> &out) {
                for (int i = 0; i < 3; ++i) f();
                for (int i = 0; i < calls; ++i) {
                    const auto t0 = std::chrono::steady_clock::now();
                    f();
                    out.push_back(
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                            .count());
                }
            };
            for (int r = 0; r < rounds; ++r) {
                if (r % 2 == 0)
                    time(call_jit, tj), time(call_export, te);
                else
                    time(call_export, te), time(call_jit, tj);
            }
            const double gj = c.flops() / median(tj) / 1e9, ge = c.flops() / median(te) / 1e9;
            fmt::print("{:<22} {:>10.1f} {:>10.1f} {:>6.3f}x\n", cs.label, gj, ge, ge / gj);
            std::fflush(stdout);
            dlclose(lib);
        }
        std::filesystem::remove_all(dir);
    } catch (const std::exception &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
    return 0;
}
