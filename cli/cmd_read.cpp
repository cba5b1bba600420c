#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "env/environment.h"
#include "env/graph_observation.h"
#include "looptool/actions/actions.h"
#include "looptool/check/reference_progress.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptool::cli {

namespace {
// The interpreter runs ~10 ns per statement instance; above this many FLOPs (~1 s) the final
// tree is checked through its JIT kernel only.
constexpr double kInterpreterFlopsLimit = 2e8;

nlohmann::json observation_json(const looptune::Observation &o) {
    using K = looptune::Observation::Kind;
    nlohmann::json j;
    j["space"] = o.space;
    if (o.kind == K::Scalar) j["value"] = o.scalar;
    if (o.kind == K::Text) j["value"] = o.text;
    if (o.kind == K::Tensor) {
        j["shape"] = o.shape;
        j["values"] = o.values;
    }
    return j;
}

std::string observation_text(const looptune::Observation &o) {
    using K = looptune::Observation::Kind;
    if (o.kind == K::Scalar) return fmt::format("{}: {:.6g}", o.space, o.scalar);
    if (o.kind == K::Text) return fmt::format("{}:\n{}", o.space, o.text);
    std::string s = fmt::format("{} [", o.space);
    for (size_t i = 0; i < o.shape.size(); ++i) s += fmt::format("{}{}", i ? "x" : "", o.shape[i]);
    s += "]:\n";
    const size_t cols = size_t(o.shape.back());
    for (size_t i = 0; i < o.values.size(); ++i)
        s += fmt::format("{:.3g}{}", o.values[i], (i + 1) % cols == 0 ? "\n" : " ");
    return s;
}

}  // namespace

Run add_read(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "read",
        "Load a benchmark, replay actions with GFLOPS and rewards per step, verify the result");
    struct Opts {
        std::string bench, actions, actions_file, observe, graph;
        bool skip_illegal = false, json = false, quiet = false, naive = false, measure = true;
        double tolerance = 1;
        int max_loops = 10;
        looptune::EnvConfig env;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--bench", o->bench, "Benchmark file (ours or loop_tool's format)")->required();
    auto *acts =
        cmd->add_option("--actions", o->actions, "Comma-separated actions, e.g. split_4,down");
    cmd->add_option("--actions-file", o->actions_file,
                    "CSV of actions: one per line or per field, header optional")
        ->excludes(acts);
    add_env_options(cmd, o->env);
    cmd->add_flag("--skip-illegal", o->skip_illegal,
                  "Skip illegal actions (as LoopTune's reader did) instead of failing");
    cmd->add_flag(
        "--naive", o->naive,
        "Start from the benchmark's naive nest instead of the schedule stored in the file");
    add_tolerance_option(cmd, o->tolerance);
    cmd->add_option("--observe", o->observe,
                    "Observation spaces to print after each step: runtime, flops, ir, loop_tree, "
                    "loops_tensor, stride_tensor, prev_actions_tensor");
    cmd->add_option("--max-loops", o->max_loops, "Rows of loops_tensor")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--graph", o->graph,
                    "Print the final loop-tree and dataflow graphs: dot or graphml")
        ->check(CLI::IsMember({"dot", "graphml"}));
    cmd->add_flag("--measure,!--no-measure", o->measure,
                  "JIT-compile and measure the tree after each action (GFLOPS, reward, % of peak); "
                  "on by default");
    cmd->add_flag("--quiet", o->quiet, "Print only the table, the final tree and the verification");
    cmd->add_flag("--json", o->json, "Machine-readable output");
    return [o] {
        looptune::EnvConfig cfg = o->env;
        cfg.reference.progress = true;  // on stderr, after 1 s
        cfg.max_loops = o->max_loops;
        cfg.max_steps = 1 << 30;
        cfg.measure_enabled = o->measure;
        const auto spaces = split_list(o->observe);
        for (const auto &s : spaces) {
            const auto &known = looptune::observation_space_names();
            if (std::find(known.begin(), known.end(), s) == known.end())
                throw Error(fmt::format("--observe: unknown observation space '{}'", s));
        }
        Program start = load_program_file(o->bench);
        std::vector<Action> actions =
            o->actions_file.empty() ? parse_action_list(o->actions)
                                    : parse_action_csv(read_file(o->actions_file), o->actions_file);

        looptune::Environment env(cfg);
        env.reset(o->naive ? Program::naive(start.comp) : start);
        const double peak = env.max_gflops();
        nlohmann::json steps = nlohmann::json::array();
        auto observations = [&]() {
            nlohmann::json obs = nlohmann::json::array();
            for (const auto &s : spaces) obs.push_back(observation_json(env.observe(s)));
            return obs;
        };
        auto print_observations = [&]() {
            for (const auto &s : spaces) fmt::print("{}\n", observation_text(env.observe(s)));
        };
        if (!o->json) {
            if (o->measure)
                fmt::print("{}: {} (peak {:.1f} GFLOPS)\n", o->bench, start.comp->name, peak);
            if (!o->quiet) fmt::print("initial loop tree:\n{}\n", dump(env.program()));
            if (o->measure) {
                fmt::print("{:>4}  {:<12} {:<6} {:>9} {:>9} {:>7}\n", "step", "action", "legal",
                           "GFLOPS", "reward", "%peak");
                fmt::print("{:>4}  {:<12} {:<6} {:>9.2f} {:>9} {:>6.1f}%\n", 0, "(start)", "",
                           env.gflops(), "", 100 * env.gflops() / peak);
            }
            print_observations();
        }
        steps.push_back({{"step", 0},
                         {"action", nullptr},
                         {"legal", true},
                         {"gflops", env.gflops()},
                         {"reward", 0.0},
                         {"fraction_of_peak", env.gflops() / peak},
                         {"observations", observations()}});
        for (size_t i = 0; i < actions.size(); ++i) {
            const Action a = actions[i];
            const char *why = env.action_space().index_of(a) < 0 ? "not in the action space"
                                                                 : why_illegal(env.program(), a);
            if (why && !o->skip_illegal)
                throw Error(
                    fmt::format("step {}: illegal action {}: {}", i + 1, action_name(a), why));
            nlohmann::json row{
                {"step", i + 1}, {"action", action_name(a)}, {"legal", why == nullptr}};
            if (why) {
                row["reason"] = why;
                if (!o->json) fmt::print("{:>4}  {} skipped ({})\n", i + 1, action_name(a), why);
                steps.push_back(row);
                continue;
            }
            auto r = env.step(a);
            row["gflops"] = env.gflops();
            row["reward"] = r.reward;
            row["fraction_of_peak"] = env.gflops() / peak;
            row["compile_ms"] = r.info.compile_ms;
            row["tree"] = dump(env.program());
            row["observations"] = observations();
            steps.push_back(row);
            if (!o->json) {
                if (o->measure)
                    fmt::print("{:>4}  {:<12} {:<6} {:>9.2f} {:>+9.4f} {:>6.1f}%\n", i + 1,
                               action_name(a), "yes", env.gflops(), r.reward,
                               100 * env.gflops() / peak);
                else
                    fmt::print("{:>4}  {}\n", i + 1, action_name(a));
                if (!o->quiet) fmt::print("{}\n", dump(env.program()));
                print_observations();
            }
        }
        const Program &final_program = env.program();
        // The final tree: through the interpreter when that is affordable, and through its JIT
        // kernel when measuring or when the interpreter would be too slow.
        const bool small = final_program.comp->flops() <= kInterpreterFlopsLimit;
        Comparison cmp;
        std::string how;
        if (small) {
            const ReferenceProgressEnd progress(cfg.reference.progress);
            cmp = verify_schedule(final_program, 1, o->tolerance, cfg.reference);
            progress.done();
            how = "interpreter";
        }
        if ((o->measure || !small) && cmp.ok) {
            Comparison k = env.verify(final_program, o->tolerance);
            how += how.empty() ? "JIT kernel" : " and JIT kernel";
            if (!k.ok || !small)
                cmp = k;
            else
                cmp.max_error_ratio = std::max(cmp.max_error_ratio, k.max_error_ratio);
        }
        std::string tree_graph, flow_graph;
        if (!o->graph.empty()) {
            auto export_graph = [&](const looptune::Graph &g) {
                return o->graph == "dot" ? looptune::to_dot(g) : looptune::to_graphml(g);
            };
            tree_graph = export_graph(looptune::loop_tree_graph(final_program));
            flow_graph = export_graph(looptune::dataflow_graph(*final_program.comp));
        }
        if (o->json) {
            nlohmann::json j;
            j["bench"] = o->bench;
            j["benchmark"] = final_program.comp->name;
            j["peak_gflops"] = peak;
            j["steps"] = steps;
            j["final_tree"] = dump(final_program);
            j["program"] = serialize(final_program);
            j["gflops"] = env.gflops();
            j["verified"] = cmp.ok;
            j["verified_with"] = how;
            j["max_error_ratio"] = cmp.max_error_ratio;
            j["tolerance"] = o->tolerance;
            j["checked_elements"] = cmp.checked;
            j["output_elements"] = cmp.total;
            j["unbounded_elements"] = cmp.unbounded;
            if (!cmp.ok) {
                j["mismatches"] = cmp.mismatches;
                j["first_mismatch"] = cmp.first_mismatch;
            }
            if (!o->graph.empty()) {
                j["loop_tree_graph"] = tree_graph;
                j["dataflow_graph"] = flow_graph;
            }
            print_json(j);
        } else {
            if (o->measure)
                fmt::print("final loop tree ({:.2f} GFLOPS, {:.1f}% of peak):\n{}\n", env.gflops(),
                           100 * env.gflops() / peak, dump(final_program));
            else
                fmt::print("final loop tree:\n{}\n", dump(final_program));
            if (cmp.ok)
                fmt::print(
                    "verified ({}): matches the reference on {} (largest error {:.3g}x its "
                    "bound)\n",
                    how, cmp.coverage(), cmp.max_error_ratio);
            else
                fmt::print("MISMATCH ({}): {}; first {}\n", how, cmp.failures(o->tolerance),
                           cmp.first_mismatch);
            fmt::print("{}{}", tree_graph, flow_graph);
        }
        return cmp.ok ? 0 : 2;
    };
}

}  // namespace looptool::cli
