#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "cli/commands.h"
#include "looptool/actions.h"
#include "looptool/error.h"
#include "looptool/interpreter.h"
#include "looptool/jit.h"
#include "looptool/measure.h"
#include "looptool/text_format.h"

namespace looptool::cli {

namespace {

// The interpreter runs ~10 ns per statement instance; above this many FLOPs (~1 s) the final
// tree is checked through its JIT kernel only.
constexpr double kInterpreterFlopsLimit = 2e8;

/// Runs the JIT kernel on random inputs (outputs and temporaries NaN-filled, so a skipped
/// element cannot pass) and compares it with the reference.
Comparison verify_kernel(const Program &p, KernelFn fn, double tolerance) {
    const Computation &c = *p.comp;
    Buffers want = make_buffers(c, 1);
    Buffers got = want;
    run_reference(c, want);
    for (size_t t = 0; t < c.tensors.size(); ++t)
        if (c.tensors[t].kind != TensorKind::Input)
            std::fill(got.data[t].begin(), got.data[t].end(), std::nanf(""));
    int32_t cancel = 0;
    fn(got.pointers().data(), &cancel);
    return compare_outputs(c, want, got, tolerance);
}

/// Compiles and measures p (a short protocol: read is interactive).
struct Timing {
    double gflops = 0, compile_ms = 0, cv = 0;
    bool timed_out = false;
};
Timing time_program(Jit &jit, const Program &p, Buffers &buffers) {
    MeasureOptions o{.warmup = 2, .min_runs = 5, .min_time_s = 0.02, .max_runs = 10000,
                     .time_cap_s = 2.0, .pin_core = -1};
    Kernel k = jit.compile(p);
    Measurement m = measure_kernel(k.fn, *p.comp, buffers, o);
    return {m.median_gflops, k.compile_ms, m.cv, m.timed_out};
}

std::string timing_text(const Timing &t, double peak) {
    return fmt::format("{:.2f} GFLOPS  {:.1f}% of peak{}", t.gflops, 100 * t.gflops / peak,
                       t.timed_out ? "  (timed out: an upper bound)" : "");
}

nlohmann::json timing_json(const Timing &t, double peak) {
    return {{"gflops", t.gflops}, {"percent_peak", 100 * t.gflops / peak},
            {"compile_ms", t.compile_ms}, {"cv", t.cv}, {"timed_out", t.timed_out}};
}

}  // namespace

Run add_read(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "read", "Load a benchmark, replay an action sequence and verify the final loop tree");
    struct Opts {
        std::string bench, actions, actions_file, space = "full";
        bool skip_illegal = false, json = false, quiet = false, measure = true;
        double tolerance = 1e-4;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--bench", o->bench, "Benchmark file (ours or loop_tool's format)")->required();
    auto *acts = cmd->add_option("--actions", o->actions, "Comma-separated actions, e.g. split_4,down");
    cmd->add_option("--actions-file", o->actions_file,
                    "CSV of actions: one per line or per field, header optional")
        ->excludes(acts);
    cmd->add_option("--space", o->space, "Action space: looptune or full");
    cmd->add_flag("--skip-illegal", o->skip_illegal,
                  "Skip illegal actions (as LoopTune's reader did) instead of failing");
    cmd->add_option("--tolerance", o->tolerance, "Relative error allowed in verification");
    cmd->add_flag("--measure,!--no-measure", o->measure,
                  "JIT-compile and measure the tree after each action (GFLOPS, % of peak); on by "
                  "default");
    cmd->add_flag("--quiet", o->quiet, "Print only the final tree and the verification");
    cmd->add_flag("--json", o->json, "Machine-readable output");
    return [o] {
        ActionSpace space = ActionSpace::preset(o->space);
        Program p = load_program_file(o->bench);
        std::vector<Action> actions;
        if (!o->actions_file.empty())
            actions = parse_action_csv(read_file(o->actions_file), o->actions_file);
        else
            actions = parse_action_list(o->actions);

        // Measurement: one JIT, the roof (MAX_GFLOPS or the stored peak), one set of buffers.
        std::unique_ptr<Jit> jit;
        double peak = 0;
        Buffers buffers;
        Timing timing;
        if (o->measure) {
            jit = Jit::create();
            peak = max_gflops();
            buffers = make_buffers(p.computation(), 1);
            timing = time_program(*jit, p, buffers);
        }

        nlohmann::json steps = nlohmann::json::array();
        if (!o->json && !o->quiet) {
            fmt::print("initial loop tree:\n{}\n", dump(p));
            if (o->measure) fmt::print("step 0: (initial)  {}\n\n", timing_text(timing, peak));
        }
        for (size_t i = 0; i < actions.size(); ++i) {
            Action a = actions[i];
            const char *why = space.index_of(a) < 0 ? "not in the action space" : why_illegal(p, a);
            if (why) {
                if (!o->skip_illegal)
                    throw Error(fmt::format("step {}: illegal action {}: {}", i + 1, action_name(a), why));
                steps.push_back({{"step", i + 1}, {"action", action_name(a)}, {"legal", false}, {"reason", why}});
                if (!o->json) fmt::print("step {}: {} skipped ({})\n\n", i + 1, action_name(a), why);
                continue;
            }
            Program next = apply(p, a);
            // Cursor moves leave the schedule, and so its speed, unchanged.
            const bool changed = !(next.tree == p.tree);
            p = std::move(next);
            if (o->measure && changed) timing = time_program(*jit, p, buffers);
            nlohmann::json step{{"step", i + 1}, {"action", action_name(a)}, {"legal", true}, {"tree", dump(p)}};
            if (o->measure) step["measurement"] = timing_json(timing, peak);
            steps.push_back(step);
            if (!o->json && !o->quiet) {
                if (o->measure)
                    fmt::print("step {}: {}  {}\n{}\n", i + 1, action_name(a), timing_text(timing, peak), dump(p));
                else
                    fmt::print("step {}: {}\n{}\n", i + 1, action_name(a), dump(p));
            }
        }
        // The final tree: through the interpreter when that is affordable, and through the JIT
        // kernel that was measured (always, when measuring; instead of the interpreter for big
        // computations).
        const bool small = p.computation().flops() <= kInterpreterFlopsLimit;
        const bool use_jit = o->measure || !small;
        if (use_jit && !jit) jit = Jit::create();
        Comparison cmp;
        std::string how;
        if (small) {
            cmp = verify_schedule(p, 1, o->tolerance);
            how = "interpreter";
        }
        if (use_jit && cmp.ok) {
            Comparison k = verify_kernel(p, jit->compile(p).fn, o->tolerance);
            how += how.empty() ? "JIT kernel" : " and JIT kernel";
            if (!k.ok || !small) cmp = k;
            else cmp.max_rel_error = std::max(cmp.max_rel_error, k.max_rel_error);
        }
        if (o->json) {
            nlohmann::json j;
            j["bench"] = o->bench;
            j["steps"] = steps;
            j["final_tree"] = dump(p);
            j["program"] = serialize(p);
            j["verified"] = cmp.ok;
            j["verified_with"] = how;
            if (o->measure) {
                j["peak_gflops"] = peak;
                j["final_measurement"] = timing_json(timing, peak);
            }
            j["max_rel_error"] = cmp.max_rel_error;
            if (!cmp.ok) j["first_mismatch"] = cmp.first_mismatch;
            print_json(j);
        } else {
            fmt::print("final loop tree:\n{}\n", dump(p));
            if (o->measure)
                fmt::print("final: {}  (peak {:.1f} GFLOPS)\n", timing_text(timing, peak), peak);
            if (cmp.ok)
                fmt::print("verified ({}): matches the reference (max relative error {:.2e})\n", how,
                           cmp.max_rel_error);
            else
                fmt::print("MISMATCH ({}): {} (max relative error {:.2e})\n", how, cmp.first_mismatch,
                           cmp.max_rel_error);
        }
        return cmp.ok ? 0 : 2;
    };
}

}  // namespace looptool::cli
