// Side-by-side benchmark of matmuls with an epilogue (looptool/gen/epilogue.h), single-threaded
// and pinned: our kernel with the epilogue fused into the matmul's register tile (`fuse`), the
// same schedule without `fuse` (the epilogue a second pass over the temporary), and oneDNN's
// matmul with post-ops (baselines/onednn_matmul_postops.h). Our schedule is the fastest of tune's
// seeds for the shape (search/seeds.h; each ends with `fuse`), ranked with the short protocol.
// Every kernel is checked against the reference before it is timed; the sides alternate round by
// round and each figure is the median of the rounds.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "baselines/onednn_matmul_postops.h"
#include "baselines/reference_kernels.h"
#include "baselines/side_by_side.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/error.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"
#include "search/seeds.h"
#include "util/stats.h"

using namespace looptool;
namespace lb = looptune::bench;

namespace {

struct Side {
    std::string name;
    std::function<double()> measure;  // median GFLOPS of one full measurement
    std::vector<double> rounds;
};

// Our kernel of p: checked against the reference, then measured on the same buffers with `o`.
std::function<double(const MeasureOptions &)> ours(Jit &jit, const Program &p) {
    struct State {
        Program p;
        Buffers b;
        KernelFn fn;
    };
    auto st = std::make_shared<State>(State{p, make_buffers(*p.comp, 1), nullptr});
    const Reference want = compute_reference(*p.comp, st->b);
    st->fn = jit.compile(p).fn;
    const int32_t cancel = 0;
    st->fn(st->b.pointers().data(), &cancel);
    const Comparison c = compare_outputs(*p.comp, want, st->b);
    if (!c.ok)
        throw Error(
            fmt::format("{}: differs from the reference: {}", p.comp->name, c.first_mismatch));
    return [st](const MeasureOptions &o) {
        return measure_kernel_uncut(st->fn, *st->p.comp, st->b, o).median_gflops;
    };
}

Program applied(const Computation &c, const std::vector<Action> &as) {
    Program p = Program::naive(std::make_shared<const Computation>(c));
    for (Action a : as) p = apply(p, a);
    return p;
}

// "MxNxK:words", e.g. 128x768x768:bias,gelu.
Computation case_of(const std::string &spec) {
    const auto colon = spec.find(':');
    int64_t m = 0, n = 0, k = 0;
    if (colon == std::string::npos ||
        std::sscanf(spec.substr(0, colon).c_str(), "%ldx%ldx%ld", &m, &n, &k) != 3 || m < 1 ||
        n < 1 || k < 1 || m > kMaxExtent || n > kMaxExtent || k > kMaxExtent)
        throw Error(
            fmt::format("--case '{}': expected MxNxK:EPILOGUE (128x768x768:bias,gelu)", spec));
    const Epilogue e = parse_epilogue(spec.substr(colon + 1));
    if (!e.any()) throw Error(fmt::format("--case '{}': no epilogue", spec));
    return make_matmul_epilogue(m, n, k, e);
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app(
        "Matmul + epilogue: our kernel fused and unfused vs oneDNN's matmul with post-ops");
    lb::SideBySide sbs;
    sbs.add_options(app);
    std::vector<std::string> cases = {"128x768x768:bias,gelu", "128x3072x768:bias,gelu-tanh",
                                      "128x768x3072:bias,residual", "256x256x256:bias,relu"};
    app.add_option("--case", cases, "MxNxK:EPILOGUE (generate --epilogue's words)")
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        const MeasureOptions full = sbs.start(60);
        const MeasureOptions quick = sbs.quick(0.02, 10);
        lb::load_onednn();
        JitOptions jo;
        jo.threads = 1;
        auto jit = Jit::create(jo);
        nlohmann::json out = nlohmann::json::array();
        for (const std::string &spec : cases) {
            const Computation c = case_of(spec);
            const auto seeds =
                looptune::tune_seeds(c, looptune::kSeedSteps, ActionSpace::preset("full"));
            if (seeds.empty()) throw Error(fmt::format("{}: no seed applies", c.name));
            double best = -1;
            std::string best_name;
            std::vector<Action> best_actions;
            for (const auto &s : seeds) {
                const double g = ours(*jit, applied(c, s.actions))(quick);
                if (g > best) best = g, best_name = s.name, best_actions = s.actions;
            }
            std::vector<Action> unfused = best_actions;
            const bool fused = !unfused.empty() && unfused.back() == Action::Fuse;
            if (fused) unfused.pop_back();
            auto f = ours(*jit, applied(c, best_actions)), u = ours(*jit, applied(c, unfused));
            std::vector<Side> sides;
            sides.push_back({"ours " + best_name, [f, full] { return f(full); }, {}});
            if (fused)
                sides.push_back({"ours, same tile unfused", [u, full] { return u(full); }, {}});
            sides.push_back({lb::kOnednnMatmul, lb::onednn_postops_measurer(c.name, c), {}});
            for (int r = 0; r < sbs.rounds; ++r)
                for (Side &s : sides) s.rounds.push_back(s.measure());
            const double lib = looptune::median(sides.back().rounds);
            fmt::print("{} (core {}, oneDNN {})\n", c.name, sbs.core,
                       lb::onednn_postops_implementation(c));
            for (Side &s : sides) {
                const double g = looptune::median(s.rounds);
                fmt::print("  {:<34} {:8.2f} GFLOPS {:6.2f}x oneDNN\n", s.name, g, g / lib);
                out.push_back({{"case", c.name},
                               {"side", s.name},
                               {"gflops", g},
                               {"vs_onednn", g / lib},
                               {"rounds", s.rounds}});
            }
        }
        if (!sbs.json_path.empty()) write_file_atomically(sbs.json_path, out.dump(2) + "\n");
    } catch (const std::exception &e) {
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
    return 0;
}
