// Side-by-side benchmark of the row operations (softmax, layernorm, GELU; looptool/ir/row_ops.h),
// single-threaded and pinned: our JIT's kernels (the naive nest, which LLVM's loop vectorizer
// widens, each nest's row loop split and vectorized, fused by the lowering and not, and any
// --program given, e.g. `tune`'s result) against oneDNN's softmax and layer_normalization
// primitives and against the streaming copy of X into Y, the memory roof of an op that reads X once
// and writes Y once (baselines/onednn_rowop.h). Every kernel is checked against the reference
// before it is timed; the sides alternate round by round and each figure is the median of the
// rounds.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "baselines/onednn_rowop.h"
#include "baselines/side_by_side.h"
#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"
#include "looptool/jit/jit.h"
#include "looptool/measure/measure.h"
#include "util/stats.h"

using namespace looptool;
namespace lb = looptune::bench;

namespace {

// Each nest over (row, column): its column loop split by `w` (or whole when shorter) and the
// inner part vectorized; one-loop nests are left alone.
Program vectorize_rows(Program p, int64_t w) {
    std::string a;
    for (size_t n = 0; n < p.tree.nests.size(); ++n) {
        if (n) a += "down, ";
        if (p.tree.nests[n].loops.size() != 2) continue;
        const int64_t cols = p.comp->vars[size_t(p.tree.nests[n].loops[1].var)].extent;
        a += cols > w ? fmt::format("down, split_{}, down, vectorize, ", w) : "down, vectorize, ";
    }
    for (Action x : parse_action_list(a.substr(0, a.size() - 2))) p = apply(p, x);
    return p;
}

struct Side {
    std::string name;
    std::function<double()> measure;  // median GFLOPS of one full measurement
    std::vector<double> rounds;
};

// Our kernel of p: checked against the reference, then measured on the same buffers.
std::function<double()> ours(Jit &jit, const Program &p, const std::string &name) {
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
        throw Error(fmt::format("{}: differs from the reference: {}", name, c.first_mismatch));
    return [st] { return measure_kernel_uncut(st->fn, *st->p.comp, st->b).median_gflops; };
}

Computation case_of(const std::string &spec) {
    const auto colon = spec.find(':'), x = spec.find('x', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || x == std::string::npos || x < colon)
        throw Error(fmt::format("--case '{}': expected KIND:ROWSxCOLS (softmax:1536x128)", spec));
    const std::string kind = spec.substr(0, colon);
    const int64_t r = std::stoll(spec.substr(colon + 1, x - colon - 1)),
                  c = std::stoll(spec.substr(x + 1));
    if (kind == "softmax") return make_softmax(r, c);
    if (kind == "layernorm") return make_layernorm(r, c);
    if (kind == "gelu" || kind == "gelu-tanh") return make_gelu(r, c, kind == "gelu-tanh");
    throw Error(fmt::format("--case '{}': kind is softmax, layernorm, gelu or gelu-tanh", spec));
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app("Row operations: our kernels vs oneDNN's primitives and the streaming copy");
    lb::SideBySide sbs;
    sbs.add_options(app);
    std::vector<std::string> cases = {"softmax:1536x128", "layernorm:128x768", "gelu:512x3072"},
                             programs;
    int64_t width = 64;
    app.add_option("--case", cases, "KIND:ROWSxCOLS (kinds: softmax, layernorm, gelu, gelu-tanh)")
        ->capture_default_str();
    app.add_option("--program", programs, "Also measure these schedules (of a --case's op)");
    app.add_option("--width", width, "Lanes of the vectorized row loops")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        sbs.start(60);  // pins; every side is measured with the default protocol
        JitOptions jo;
        jo.threads = 1;
        auto jit = Jit::create(jo);
        jo.lower.fuse_rows = false;  // each pass over all rows before the next
        auto unfused = Jit::create(jo);
        nlohmann::json out = nlohmann::json::array();
        for (const std::string &spec : cases) {
            const auto comp = std::make_shared<Computation>(case_of(spec));
            const Program naive = Program::naive(comp);
            std::vector<Side> sides;
            sides.push_back({"ours-naive", ours(*jit, naive, "naive"), {}});
            const Program vec = vectorize_rows(naive, width);
            sides.push_back({fmt::format("ours-vec{}", width), ours(*jit, vec, "vectorized"), {}});
            sides.push_back({fmt::format("ours-vec{}-unfused", width),
                             ours(*unfused, vec, "vectorized, unfused"),
                             {}});
            for (const std::string &f : programs) {
                const Program p = load_program_file(f);
                if (*p.comp == *comp) sides.push_back({f, ours(*jit, p, f), {}});
            }
            for (const char *m : {lb::kOnednnSoftmax, lb::kOnednnLayernorm, lb::kStreamingCopy})
                if (lb::rowop_method_runs_on(m, *comp))
                    sides.push_back({m, lb::rowop_measurer(comp->name, m, *comp), {}});
            for (int r = 0; r < sbs.rounds; ++r)
                for (Side &s : sides) s.rounds.push_back(s.measure());
            const double bytes = lb::rowop_min_bytes(*comp), flops = comp->flops();
            double copy = 0;
            for (Side &s : sides)
                if (s.name == lb::kStreamingCopy) copy = looptune::median(s.rounds);
            fmt::print("{} ({:.1f} MB moved at least, core {})\n", comp->name, bytes / 1e6,
                       sbs.core);
            for (Side &s : sides) {
                const double g = looptune::median(s.rounds), secs = flops / (g * 1e9);
                const double gbs = bytes / secs / 1e9;
                fmt::print("  {:<28} {:8.2f} GFLOPS {:8.2f} GB/s {:6.2f}x copy\n", s.name, g, gbs,
                           g / copy);
                out.push_back({{"case", comp->name},
                               {"side", s.name},
                               {"gflops", g},
                               {"gbytes_per_s", gbs},
                               {"vs_copy", g / copy},
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
