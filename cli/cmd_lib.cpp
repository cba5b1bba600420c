#include <fmt/format.h>

#include "cli/commands.h"
#include "env/store/measurement_store.h"
#include "env/store/schedule_library.h"
#include "lib/kernel_library.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "tune/schedule_library_use.h"
#include "util/threads.h"

namespace looptool::cli {

namespace {

struct LibCliOptions {
    std::string store, out, machine, cpu, block = "64,128,256";
    int align = 4;
    bool json = false;
    int threads = 0;  // add_threads_option sets the default
};

std::array<int64_t, 3> parse_block(const std::string &text) {
    const std::vector<std::string> parts = split_list(text);
    std::array<int64_t, 3> b{};
    bool ok = parts.size() == 3;
    for (size_t i = 0; ok && i < 3; ++i) {
        try {
            size_t used = 0;
            b[i] = std::stoll(parts[i], &used);
            ok = used == parts[i].size();
        } catch (const std::exception &) {
            ok = false;
        }
    }
    if (!ok) throw Error(fmt::format("--block: expected M,N,K (three integers), not '{}'", text));
    return b;
}

int run_lib_build(const LibCliOptions &o) {
    looptune::KernelLibraryOptions opts;
    opts.out = o.out;
    opts.cpu = o.cpu;
    opts.block = parse_block(o.block);
    opts.threads = looptune::resolve_threads(o.threads);
    // tune files N-thread schedules under the machine plus |threads=N.
    opts.machine = o.machine.empty() ? looptune::library_machine(opts.threads) : o.machine;
    opts.align = o.align;
    const std::string store = o.store.empty() ? looptune::ScheduleLibrary::default_path() : o.store;
    if (store.empty())
        throw Error("lib build: no store: give --store, or set LOOPTUNE_LIBRARY or HOME");
    const looptune::KernelLibrary lib = looptune::build_kernel_library_from_store(store, opts);
    if (o.json) {
        nlohmann::json kernels = nlohmann::json::array();
        for (const auto &k : lib.kernels)
            kernels.push_back({{"function", k.function},
                               {"name", k.entry.name},
                               {"kind", k.entry.kind},
                               {"shape", k.entry.shape},
                               {"gflops", k.entry.gflops},
                               {"verified", k.entry.verified}});
        print_json({{"store", store},
                    {"machine", opts.machine},
                    {"cpu", lib.cpu},
                    {"triple", lib.triple},
                    {"files", lib.files},
                    {"kernels", kernels},
                    {"block",
                     {{"shape", lib.block.shape},
                      {"source", lib.block_source},
                      {"gflops", lib.block.gflops}}}});
        return 0;
    }
    fmt::print("{} kernels of {} for {} ({}, {}):\n", lib.kernels.size(), store, opts.machine,
               lib.cpu, lib.triple);
    for (const auto &k : lib.kernels)
        fmt::print("  {:<32} {:<7} {:>8.1f} GFLOPS{}\n", k.function, k.entry.kind, k.entry.gflops,
                   k.entry.verified ? "" : " (not verified)");
    fmt::print("block kernel {}x{}x{} from {} ({:.1f} GFLOPS)\n", opts.block[0], opts.block[1],
               opts.block[2], lib.block_source, lib.block.gflops);
    for (const auto &f : lib.files) fmt::print("wrote {}\n", f);
    return 0;
}

}  // namespace

Run add_lib(CLI::App &app) {
    auto *lib = app.add_subcommand("lib", "Kernel libraries from the schedule library");
    lib->require_subcommand(1);
    auto *build = lib->add_subcommand(
        "build",
        "Compile every tuned kernel of a machine into liblooptune_kernels.so/.a with "
        "looptune_kernels.h (lt_sgemm, lt_sconv2d by shape) and a JSON manifest");
    auto o = std::make_shared<LibCliOptions>();
    build->add_option("--store", o->store,
                      "Store holding the schedule library (default: tune's, "
                      "$LOOPTUNE_LIBRARY or ~/.cache/looptune/store.sqlite)");
    build->add_option("--out", o->out, "Output directory (created if missing)")->required();
    build->add_option("--machine", o->machine,
                      "Machine fingerprint whose kernels to take (default: this machine's)");
    build->add_option("--cpu", o->cpu,
                      "LLVM CPU to compile for, e.g. znver4, x86-64-v3 (default: this host)");
    build
        ->add_option("--block", o->block,
                     "M,N,K of the block kernel lt_sgemm tiles other shapes over")
        ->capture_default_str();
    add_threads_option(build, o->threads,
                       "; above 1 the default machine is this one's N-thread library (tune "
                       "--threads N)");
    build
        ->add_option("--align", o->align,
                     "Bytes the kernels assume their pointers aligned to: 4 takes any float "
                     "array as it is, 64 is the JIT's lowering (others are copied per call)")
        ->check(CLI::IsMember({4, 64}))
        ->capture_default_str();
    build->add_flag("--json", o->json, "Machine-readable output");
    return [o] { return run_lib_build(*o); };
}

}  // namespace looptool::cli
