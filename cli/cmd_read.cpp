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

struct ReadOptions {
    std::string bench, actions, actions_file, observe, graph;
    bool skip_illegal = false, json = false, quiet = false, naive = false, measure = true;
    double tolerance = 1;
    int max_loops = 10;
    looptune::EnvConfig env;
};

namespace {

void add_read_options(CLI::App *cmd, ReadOptions &o) {
    cmd->add_option("--bench", o.bench, "Benchmark file (ours or loop_tool's format)")->required();
    auto *acts =
        cmd->add_option("--actions", o.actions, "Comma-separated actions, e.g. split_4,down");
    cmd->add_option("--actions-file", o.actions_file,
                    "CSV of actions: one per line or per field, header optional")
        ->excludes(acts);
    add_env_options(cmd, o.env);
    cmd->add_flag("--skip-illegal", o.skip_illegal,
                  "Skip illegal actions (as LoopTune's reader did) instead of failing");
    cmd->add_flag(
        "--naive", o.naive,
        "Start from the benchmark's naive nest instead of the schedule stored in the file");
    add_tolerance_option(cmd, o.tolerance);
    cmd->add_option("--observe", o.observe,
                    "Observation spaces to print after each step: runtime, flops, ir, loop_tree, "
                    "loops_tensor, stride_tensor, prev_actions_tensor");
    cmd->add_option("--max-loops", o.max_loops, "Rows of loops_tensor")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--graph", o.graph,
                    "Print the final loop-tree and dataflow graphs: dot or graphml")
        ->check(CLI::IsMember({"dot", "graphml"}));
    cmd->add_flag("--measure,!--no-measure", o.measure,
                  "JIT-compile and measure the tree after each action (GFLOPS, reward, % of peak); "
                  "on by default");
    cmd->add_flag("--quiet", o.quiet, "Print only the table, the final tree and the verification");
    cmd->add_flag("--json", o.json, "Machine-readable output");
}

/// The observation spaces asked for, each checked against the known ones.
std::vector<std::string> observation_spaces(const std::string &list) {
    const auto spaces = split_list(list);
    const auto &known = looptune::observation_space_names();
    for (const auto &s : spaces)
        if (std::find(known.begin(), known.end(), s) == known.end())
            throw Error(fmt::format("--observe: unknown observation space '{}'", s));
    return spaces;
}

/// Replays the actions from the environment's current state, printing a table row (and the
/// tree and observations) per step unless --json; returns every step as JSON.
class Replay {
public:
    Replay(looptune::Environment &env, const ReadOptions &o, std::vector<std::string> spaces)
        : env_(env), o_(o), spaces_(std::move(spaces)), peak_(env.max_gflops()) {}

    nlohmann::json run(const std::vector<Action> &actions, const std::string &name) {
        nlohmann::json steps = nlohmann::json::array();
        if (!o_.json) print_start(name);
        steps.push_back({{"step", 0},
                         {"action", nullptr},
                         {"legal", true},
                         {"gflops", env_.gflops()},
                         {"reward", 0.0},
                         {"fraction_of_peak", env_.gflops() / peak_},
                         {"observations", observations()}});
        for (size_t i = 0; i < actions.size(); ++i) steps.push_back(step(i + 1, actions[i]));
        return steps;
    }

private:
    nlohmann::json observations() const {
        nlohmann::json obs = nlohmann::json::array();
        for (const auto &s : spaces_) obs.push_back(observation_json(env_.observe(s)));
        return obs;
    }
    void print_observations() const {
        for (const auto &s : spaces_) fmt::print("{}\n", observation_text(env_.observe(s)));
    }
    void print_start(const std::string &name) const {
        if (o_.measure) fmt::print("{}: {} (peak {:.1f} GFLOPS)\n", o_.bench, name, peak_);
        if (!o_.quiet) fmt::print("initial loop tree:\n{}\n", dump(env_.program()));
        if (o_.measure) {
            fmt::print("{:>4}  {:<12} {:<6} {:>9} {:>9} {:>7}\n", "step", "action", "legal",
                       "GFLOPS", "reward", "%peak");
            fmt::print("{:>4}  {:<12} {:<6} {:>9.2f} {:>9} {:>6.1f}%\n", 0, "(start)", "",
                       env_.gflops(), "", 100 * env_.gflops() / peak_);
        }
        print_observations();
    }
    nlohmann::json step(size_t n, Action a) {
        const char *why = env_.action_space().index_of(a) < 0 ? "not in the action space"
                                                              : why_illegal(env_.program(), a);
        if (why && !o_.skip_illegal)
            throw Error(fmt::format("step {}: illegal action {}: {}", n, action_name(a), why));
        nlohmann::json row{{"step", n}, {"action", action_name(a)}, {"legal", why == nullptr}};
        if (why) {
            row["reason"] = why;
            if (!o_.json) fmt::print("{:>4}  {} skipped ({})\n", n, action_name(a), why);
            return row;
        }
        auto r = env_.step(a);
        row["gflops"] = env_.gflops();
        row["reward"] = r.reward;
        row["fraction_of_peak"] = env_.gflops() / peak_;
        row["compile_ms"] = r.info.compile_ms;
        row["tree"] = dump(env_.program());
        row["observations"] = observations();
        if (o_.json) return row;
        if (o_.measure)
            fmt::print("{:>4}  {:<12} {:<6} {:>9.2f} {:>+9.4f} {:>6.1f}%\n", n, action_name(a),
                       "yes", env_.gflops(), r.reward, 100 * env_.gflops() / peak_);
        else
            fmt::print("{:>4}  {}\n", n, action_name(a));
        if (!o_.quiet) fmt::print("{}\n", dump(env_.program()));
        print_observations();
        return row;
    }

    looptune::Environment &env_;
    const ReadOptions &o_;
    const std::vector<std::string> spaces_;
    const double peak_;
};

/// The final tree checked through the interpreter when that is affordable, and through its
/// JIT kernel when measuring or when the interpreter would be too slow; `how` says which.
Comparison verify_final(looptune::Environment &env, const ReadOptions &o,
                        const looptune::EnvConfig &cfg, std::string &how) {
    const Program &p = env.program();
    const bool small = p.comp->flops() <= kInterpreterFlopsLimit;
    Comparison cmp;
    if (small) {
        const ReferenceProgressEnd progress(cfg.reference.progress);
        cmp = verify_schedule(p, 1, o.tolerance, cfg.reference);
        progress.done();
        how = "interpreter";
    }
    if ((o.measure || !small) && cmp.ok) {
        Comparison k = env.verify(p, o.tolerance);
        how += how.empty() ? "JIT kernel" : " and JIT kernel";
        if (!k.ok || !small)
            cmp = k;
        else
            cmp.max_error_ratio = std::max(cmp.max_error_ratio, k.max_error_ratio);
    }
    return cmp;
}

nlohmann::json read_json(const looptune::Environment &env, const ReadOptions &o,
                         const nlohmann::json &steps, const Comparison &cmp,
                         const std::string &how) {
    const Program &p = env.program();
    nlohmann::json j;
    j["bench"] = o.bench;
    j["benchmark"] = p.comp->name;
    j["peak_gflops"] = env.max_gflops();
    j["steps"] = steps;
    j["final_tree"] = dump(p);
    j["program"] = serialize(p);
    j["gflops"] = env.gflops();
    j["verified"] = cmp.ok;
    j["verified_with"] = how;
    j["max_error_ratio"] = cmp.max_error_ratio;
    j["tolerance"] = o.tolerance;
    j["checked_elements"] = cmp.checked;
    j["output_elements"] = cmp.total;
    j["unbounded_elements"] = cmp.unbounded;
    if (!cmp.ok) {
        j["mismatches"] = cmp.mismatches;
        j["first_mismatch"] = cmp.first_mismatch;
    }
    return j;
}

void print_read(const looptune::Environment &env, const ReadOptions &o, const Comparison &cmp,
                const std::string &how) {
    const Program &p = env.program();
    if (o.measure)
        fmt::print("final loop tree ({:.2f} GFLOPS, {:.1f}% of peak):\n{}\n", env.gflops(),
                   100 * env.gflops() / env.max_gflops(), dump(p));
    else
        fmt::print("final loop tree:\n{}\n", dump(p));
    if (cmp.ok)
        fmt::print("verified ({}): matches the reference on {} (largest error {:.3g}x its bound)\n",
                   how, cmp.coverage(), cmp.max_error_ratio);
    else
        fmt::print("MISMATCH ({}): {}; first {}\n", how, cmp.failures(o.tolerance),
                   cmp.first_mismatch);
}

int run_read(const ReadOptions &o) {
    looptune::EnvConfig cfg = o.env;
    cfg.reference.progress = true;  // on stderr, after 1 s
    cfg.max_loops = o.max_loops;
    cfg.max_steps = 1 << 30;
    cfg.measure_enabled = o.measure;
    const std::vector<std::string> spaces = observation_spaces(o.observe);
    const Program start = load_program_file(o.bench);
    const std::vector<Action> actions =
        o.actions_file.empty() ? parse_action_list(o.actions)
                               : parse_action_csv(read_file(o.actions_file), o.actions_file);
    looptune::Environment env(cfg);
    env.reset(o.naive ? Program::naive(start.comp) : start);
    const nlohmann::json steps = Replay(env, o, spaces).run(actions, start.comp->name);
    std::string how;
    const Comparison cmp = verify_final(env, o, cfg, how);
    std::string tree_graph, flow_graph;
    if (!o.graph.empty()) {
        auto export_graph = [&](const looptune::Graph &g) {
            return o.graph == "dot" ? looptune::to_dot(g) : looptune::to_graphml(g);
        };
        tree_graph = export_graph(looptune::loop_tree_graph(env.program()));
        flow_graph = export_graph(looptune::dataflow_graph(*env.program().comp));
    }
    if (o.json) {
        nlohmann::json j = read_json(env, o, steps, cmp, how);
        if (!o.graph.empty()) {
            j["loop_tree_graph"] = tree_graph;
            j["dataflow_graph"] = flow_graph;
        }
        print_json(j);
    } else {
        print_read(env, o, cmp, how);
        fmt::print("{}{}", tree_graph, flow_graph);
    }
    return cmp.ok ? 0 : 2;
}

}  // namespace

Run add_read(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "read",
        "Load a benchmark, replay actions with GFLOPS and rewards per step, verify the result");
    auto o = std::make_shared<ReadOptions>();
    add_read_options(cmd, *o);
    return [o] { return run_read(*o); };
}

}  // namespace looptool::cli
