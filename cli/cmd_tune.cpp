#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>

#include "cli/commands.h"
#include "cli/each_benchmark.h"
#include "cli/validators.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "looptool/measure/traffic.h"
#include "tune/cost_model.h"
#include "tune/guided_search.h"
#include "tune/schedule_library_use.h"
#include "util/stats.h"
#include "util/threads.h"

namespace looptool::cli {

namespace {

/// The numbers of a shape option ("64,128,256"): `count` positive extents, or `count` plus
/// the optional ones (the one at `zero_at` may be 0: a conv's padding); throws Error naming the
/// option otherwise.
std::vector<int64_t> shape_numbers(const std::string &option, const std::string &text, size_t count,
                                   size_t optional = 0, size_t zero_at = SIZE_MAX) {
    std::vector<int64_t> out;
    for (const std::string &item : split_list(text)) {
        size_t used = 0;
        int64_t v = 0;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception &) {
            used = 0;
        }
        const int64_t low = out.size() == zero_at ? 0 : 1;
        if (used != item.size() || v < low || v > kMaxExtent)
            throw Error(fmt::format("{} {}: '{}' is not {} in [{}, {}]", option, text, item,
                                    low ? "an extent" : "a padding", low, kMaxExtent));
        out.push_back(v);
    }
    if (out.size() < count || out.size() > count + optional)
        throw Error(fmt::format("{} {}: expected {} numbers{}, got {}", option, text, count,
                                optional ? fmt::format(" (or up to {})", count + optional) : "",
                                out.size()));
    return out;
}

/// What to tune: a benchmark file, or a computation given by its shape.
struct Target {
    std::string label;
    std::function<Program()> load;
};

std::vector<Target> targets(const std::vector<std::string> &benches,
                            const std::vector<std::string> &matmuls,
                            const std::vector<std::string> &bmms,
                            const std::vector<std::string> &convs,
                            const std::vector<std::string> &scores,
                            const std::vector<std::string> &contexts, const std::string &epilogue) {
    std::vector<Target> out;
    const Epilogue e = parse_epilogue(epilogue);
    if (e.any() && matmuls.empty()) throw Error("tune: --epilogue is for --matmul");
    for (const std::string &b : benches)
        out.push_back({b, [b] { return tuning_start(load_program_file(b)); }});
    // Built here: a shape that cannot be expressed fails the whole command, before any tuning.
    auto add = [&](const std::string &option, const std::string &kind, const std::string &s,
                   size_t count, size_t optional, size_t zero_at = SIZE_MAX) {
        Computation c = computation_of_shape(option + " " + s, kind,
                                             shape_numbers(option, s, count, optional, zero_at));
        if (kind == "matmul" && e.any())
            c = make_matmul_epilogue(c.vars[0].extent, c.vars[2].extent, c.vars[1].extent, e);
        out.push_back({s, [c] { return Program::naive(std::make_shared<const Computation>(c)); }});
    };
    for (const std::string &s : matmuls) add("--matmul", "matmul", s, 3, 0);
    for (const std::string &s : bmms) add("--bmm", "bmm", s, 4, 0);
    for (const std::string &s : convs) add("--conv", "conv", s, 7, 2, 8);
    for (const std::string &s : scores) add("--scores", "scores", s, 4, 0);
    for (const std::string &s : contexts) add("--context", "context", s, 4, 0);
    if (out.empty())
        throw Error(
            "tune: nothing to tune (give --bench, --matmul, --bmm, --conv, --scores or "
            "--context)");
    return out;
}

/// What the policy added to the best seed, said only where the judged rounds show it.
std::string seed_attribution(const looptune::GuidedResult &r) {
    if (r.same_as_seed)
        return fmt::format(
            "the chosen kernel is the best seed's ({}, {:.1f} GFLOPS): the policy's "
            "actions after it change no loop",
            r.best_seed, r.best_seed_gflops);
    const auto [seed_lo, seed_hi] = std::minmax_element(r.seed_rounds.begin(), r.seed_rounds.end());
    const auto [best_lo, best_hi] = std::minmax_element(r.best_rounds.begin(), r.best_rounds.end());
    const std::string rounds =
        fmt::format("{} alternating rounds: seed {:.1f}-{:.1f}, chosen {:.1f}-{:.1f} GFLOPS",
                    r.seed_rounds.size(), *seed_lo, *seed_hi, *best_lo, *best_hi);
    if (*best_lo > *seed_hi)
        return fmt::format(
            "best seed {} {:.1f} GFLOPS: the policy added {:+.1f}% ({})", r.best_seed,
            r.best_seed_gflops,
            100 * (looptune::median(r.best_rounds) / looptune::median(r.seed_rounds) - 1), rounds);
    return fmt::format(
        "best seed {} {:.1f} GFLOPS: the chosen kernel is within the rounds' spread "
        "of it ({})",
        r.best_seed, r.best_seed_gflops, rounds);
}

}  // namespace

struct TuneOptions {
    std::vector<std::string> benches, matmuls, bmms, convs, scores, contexts;
    std::string policy, store, library, epilogue, rank = "auto", cost_model;
    bool json = false, verify = false, retune = false;
    int64_t max_memory = 0;
    int threads = 0;  // add_threads_option sets the default
    looptune::GuidedConfig guided;
};

namespace {

/// What to tune: files, or computations by their shape.
void add_target_options(CLI::App *cmd, TuneOptions &o) {
    cmd->add_option("--bench", o.benches, "Benchmark file (repeatable: one policy load for all)");
    cmd->add_option(
        "--matmul", o.matmuls,
        "A matmul by its shape M,N,K (C = A B, A is M x K; repeatable), no file needed");
    cmd->add_option("--epilogue", o.epilogue,
                    "With --matmul: C = act(A B + bias) + R, generate --epilogue's words "
                    "(bias, relu|gelu|gelu-tanh, residual)");
    cmd->add_option("--bmm", o.bmms,
                    "A batched matmul by its shape B,M,N,K (C[b] = A[b] B[b], attention's "
                    "Q.K^T and P.V per head; repeatable)");
    cmd->add_option("--scores", o.scores,
                    "Attention's Q.K^T per head by B,H,T,D (sequences, heads, tokens, head "
                    "dimension; Q and K token-major [B, T, H, D]; repeatable)");
    cmd->add_option("--context", o.contexts,
                    "Attention's P.V per head by B,H,T,D (V and the output token-major; "
                    "repeatable)");
    cmd->add_option("--conv", o.convs,
                    "A conv2d by its shape N,CI,H,W,CO,KH,KW[,STRIDE[,PAD]] (images, input "
                    "channels, input rows and columns, output channels, kernel rows and columns; "
                    "stride 1 and no padding unless given; PAD zeros on each side; repeatable)");
}

void add_tune_options(CLI::App *cmd, TuneOptions &o) {
    add_target_options(cmd, o);
    cmd->add_option("--policy", o.policy,
                    "Policy file (default: the shipped policies/default.policy)");
    cmd->add_option("--store", o.store, "SQLite measurement store");
    add_threads_option(cmd, o.threads);
    cmd->add_option("--library", o.library,
                    "Store whose schedule library answers computations tuned before on this "
                    "machine, and keeps each new result once verified (default: "
                    "$LOOPTUNE_LIBRARY ('off': none), else --store, else "
                    "~/.cache/looptune/store.sqlite; 'off': none)");
    cmd->add_flag("--retune", o.retune,
                  "Search again even when the library has a schedule (the faster verified one "
                  "is kept)");
    cmd->add_option("--budget-s", o.guided.budget_s,
                    "Wall-clock budget of the search per benchmark (the seeds and the greedy "
                    "rollout are measured whatever it is, at least one call each: a shape whose "
                    "one call takes a tenth of it or more takes longer, and says so)")
        ->capture_default_str()
        ->check(positive());
    cmd->add_flag("--greedy", o.guided.greedy,
                  "Only the policy's greedy rollout (no search around it)");
    cmd->add_flag("--full-measurements{false}", o.guided.bounded_measurements,
                  "Measure every state with the environment's full protocol (slower) instead of "
                  "the search's bounded one: fewer calls, cut at 4.5 calls of the best so far");
    cmd->add_option("--steps", o.guided.max_steps,
                    "Actions from the naive nest (0: the policy's episode plus 8 per loop "
                    "longer than 256)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--batch-slice", o.guided.batch_slice,
                    "Search a batched conv2d on this many images and apply the result to the "
                    "whole batch (0: search on the whole batch; else at least 2; the figures "
                    "are then the slice's)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--band-gflops", o.guided.band_gflops,
                    "Search a large conv2d (or its batch slice) on a band of its output rows "
                    "with at least this many GFLOPs, when that is at most half of them, and "
                    "apply the result to every row (the figures reported are then the "
                    "band's; 0: search on every row)")
        ->capture_default_str()
        ->check(non_negative());
    cmd->add_option("--prefix-gflops", o.guided.prefix_gflops,
                    "Measure a kernel of more than 8x this many GFLOPs on the first iterations "
                    "of its own outermost loop, about this many GFLOPs, while searching (the "
                    "figures reported are then the prefixes'; 0: whole kernels)")
        ->capture_default_str()
        ->check(non_negative());
    cmd->add_option("--robust-margin", o.guided.robust_margin,
                    "Take a kernel up to this fraction slower than the fastest measured when the "
                    "fastest reads again from beyond L2 in short runs and this one does not "
                    "(those slow down 2-8x while other cores use the L3; 0: the fastest)")
        ->capture_default_str()
        ->check(finite_in(0, 0.5));
    cmd->add_option("--rank", o.rank,
                    "Rank schedules by this machine's cost model before measuring them and "
                    "measure only the best-ranked (model), measure every state (none), or model "
                    "when a cost model is there (auto; a damaged one is then passed over with a "
                    "warning)")
        ->capture_default_str()
        ->check(CLI::IsMember({"auto", "model", "none"}));
    cmd->add_option("--cost-model", o.cost_model,
                    "Cost model file for --rank (default: this machine's, written by "
                    "`looptool cost-model`)");
    cmd->add_flag("--verify", o.verify,
                  "Check every newly compiled kernel against the reference interpreter");
    add_max_memory_option(cmd, o.max_memory);
    cmd->add_flag("--json", o.json, "Machine-readable output");
}

/// One benchmark's result as `tune --json` gives it.
nlohmann::json tune_json(const Program &start, const looptune::GuidedResult &r,
                         const TuneOptions &o, const std::string &policy, double peak) {
    const looptune::PolicyTuneResult &g = r.greedy;
    // What the chosen kernel moves beyond L2 (looptool/measure/traffic.h).
    const looptool::TrafficEstimate traffic =
        looptool::estimate_traffic(*r.best.comp, r.best.tree, looptool::private_cache_bytes());
    nlohmann::json seeds = nlohmann::json::array();
    for (const auto &[name, gflops] : r.seed_gflops)
        seeds.push_back({{"name", name}, {"gflops", gflops}});
    nlohmann::json finalists = nlohmann::json::array();
    for (const looptune::GuidedFinalist &f : r.finalists)
        finalists.push_back({{"found_by", f.found_by}, {"gflops", f.gflops}});
    return {{"benchmark", start.comp->name},
            {"policy", policy},
            {"mode", o.guided.greedy ? "greedy" : "guided"},
            {"gflops", r.best_gflops},
            {"base_gflops", r.base_gflops},
            {"base_cut_short", r.base_cut_short},
            {"speedup", r.best_gflops / r.base_gflops},
            {"fraction_of_peak", r.best_gflops / peak},
            {"best_actions", action_names(r.actions)},
            {"found_by", r.found_by},
            {"passed_over_gflops", r.passed_over_gflops},
            {"l2_traffic_ratio", traffic.ratio()},
            {"shared_cache_ratio", traffic.shared_cache_ratio()},
            {"best_seed", r.best_seed},
            {"best_seed_gflops", r.best_seed_gflops},
            {"best_seed_actions", action_names(r.best_seed_actions)},
            {"same_as_seed", r.same_as_seed},
            {"seed_rounds", r.seed_rounds},
            {"best_rounds", r.best_rounds},
            {"seeds", seeds},
            {"finalists", finalists},
            {"greedy_gflops", g.best_gflops},
            {"greedy_actions", action_names(g.actions)},
            {"greedy_step_gflops", g.step_gflops},
            {"max_steps", r.max_steps},
            {"slice_images", r.slice_images},
            {"batch", r.batch},
            {"band_rows", r.band_rows},
            {"rows", r.rows},
            {"prefix_measurements", r.prefix_measurements},
            {"rollouts", r.rollouts},
            {"budget_s", o.guided.budget_s},
            {"call_seconds", r.call_seconds},
            {"schedules", r.schedules},
            {"measurements", r.measurements},
            {"rank", o.guided.rank ? "model" : "none"},
            {"program", serialize(r.best)}};
}

/// Where the time went and what the figures are, in lines below the result.
void print_tune_notes(const looptune::GuidedResult &r, const TuneOptions &o, double elapsed,
                      double compile_s, double measure_s) {
    // Over the budget (by more than the finalists' last measurements can): where the time went.
    if (!o.guided.greedy && elapsed > 1.2 * o.guided.budget_s)
        fmt::print(
            "  over the {:g} s budget: {:.2f} s compiling, {:.2f} s measuring; the seeds and "
            "the greedy rollout are measured whatever the budget, at least one call each "
            "(one call of the chosen kernel: {:.1f} ms{})\n",
            o.guided.budget_s, compile_s, measure_s, 1e3 * r.call_seconds,
            r.slice_images > 0 || r.band_rows > 0 ? ", on the part searched" : "");
    if (r.passed_over_gflops > 0)
        fmt::print(
            "  passed over a kernel measured at {:.1f} GFLOPS: it reads again from beyond L2 "
            "in short runs (slow while other cores use the L3)\n",
            r.passed_over_gflops);
    if (!r.best_seed.empty()) fmt::print("  {}\n", seed_attribution(r));
    if (r.slice_images > 0)
        fmt::print(
            "  searched on {} of its {} images (--batch-slice): every figure is theirs; the "
            "actions apply to the whole batch\n",
            r.slice_images, r.batch);
    if (r.band_rows > 0)
        fmt::print(
            "  searched on {} of its {} output rows (--band-gflops): every figure is "
            "theirs; the actions apply to every row\n",
            r.band_rows, r.rows);
    if (r.prefix_measurements > 0)
        fmt::print(
            "  {} measurements on the first iterations of a kernel's outermost loop "
            "(--prefix-gflops): the figures above are estimates from them\n",
            r.prefix_measurements);
}

void print_tune(const Program &start, const looptune::GuidedResult &r, const TuneOptions &o,
                double peak, double elapsed, bool tree) {
    const std::vector<std::string> best = action_names(r.actions);
    if (tree) fmt::print("{}", dump(r.best));
    fmt::print(
        "{}: best {:.1f} GFLOPS ({:.1f}% of peak {:.0f}), {}{:.2f}x the naive nest ({:.1f} "
        "GFLOPS{}), {} actions found by {}: {}\n",
        start.comp->name, r.best_gflops, 100 * r.best_gflops / peak, peak,
        r.base_cut_short ? ">= " : "", r.best_gflops / r.base_gflops, r.base_gflops,
        r.base_cut_short ? ", an upper bound: its measurement was cut short" : "", best.size(),
        r.found_by, fmt::join(best, " "));
    fmt::print(
        "  greedy rollout {:.1f} GFLOPS; {} more rollouts{}, {} schedules, {} measurements, at "
        "most {} actions; {:.3f} s\n",
        r.greedy.best_gflops, r.rollouts, o.guided.rank ? " ranked by the cost model" : "",
        r.schedules, r.measurements, r.max_steps, elapsed);
}

/// The policy and its environment, loaded for the first benchmark the library cannot answer.
struct Tuner {
    std::string path;
    std::optional<looptune::Policy> policy;
    std::unique_ptr<looptune::Environment> env;
    double load_s = 0;

    looptune::Environment &ready(const TuneOptions &o) {
        if (env) return *env;
        const auto t_load = std::chrono::steady_clock::now();
        path = o.policy.empty()
                   ? looptune::default_policy_path(looptune::resolve_threads(o.threads))
                   : o.policy;
        policy.emplace(looptune::Policy::load(path));
        looptune::EnvConfig base;
        base.store_path = o.store;
        base.verify = o.verify;
        base.max_memory = o.max_memory;
        base.threads = o.threads;
        base.reference.progress = true;
        env = std::make_unique<looptune::Environment>(policy->env_config(base));
        load_s = looptool::seconds_since(t_load);
        return *env;
    }
};

/// The schedule library tune answers from and files into, if any.
struct Library {
    std::unique_ptr<looptune::ScheduleLibrary> lib;
    std::string machine;

    explicit Library(const TuneOptions &o) {
        std::string warning;
        lib = looptune::open_tune_library(o.library, o.store, &warning);
        if (!warning.empty()) fmt::print(stderr, "warning: {}\n", warning);
        if (lib) machine = looptune::library_machine(looptune::resolve_threads(o.threads));
    }
};

void print_library_answer(const looptune::LibraryAnswer &a, const std::string &path,
                          double elapsed) {
    const looptune::LibraryEntry &e = a.entry;
    fmt::print(
        "{}: from the schedule library ({}): {:.1f} GFLOPS as measured when tuned ({}{:.2f}x "
        "the naive nest), {}, {} actions: {}\n  {:.3f} s; --retune searches again\n",
        a.program.comp->name, path, e.gflops,
        e.version.empty() ? std::string() : "looptool " + e.version + ", ",
        e.gflops / e.start_gflops, e.verified ? "verified" : "not verified", e.actions.size(),
        fmt::join(e.actions, " "), elapsed);
}

nlohmann::json library_answer_json(const looptune::LibraryAnswer &a, const std::string &path,
                                   double elapsed) {
    const looptune::LibraryEntry &e = a.entry;
    return {{"benchmark", a.program.comp->name},
            {"from_library", true},
            {"library", path},
            {"gflops", e.gflops},
            {"base_gflops", e.start_gflops},
            {"speedup", e.gflops / e.start_gflops},
            {"best_actions", e.actions},
            {"verified", e.verified},
            {"tuned_at", e.timestamp},
            {"tuned_by", e.version},
            {"seconds", elapsed},
            {"program", serialize(a.program)}};
}

/// The cost model --rank asks for: none, or loaded (auto: only when its file exists, and a
/// damaged one is passed over with a warning; model: a missing or damaged file is an error).
std::optional<looptune::CostModel> rank_model(const TuneOptions &o) {
    if (o.rank == "none") return std::nullopt;
    const std::string path =
        o.cost_model.empty() ? looptune::default_cost_model_path() : o.cost_model;
    if (o.rank == "auto" && (path.empty() || !std::filesystem::exists(path))) return std::nullopt;
    if (path.empty())
        throw Error("--rank model: no cache directory (HOME unset); give --cost-model");
    try {
        looptune::CostModel m = looptune::CostModel::load(path);
        if (m.machine() != looptune::machine_fingerprint(machine_peak_gflops()))
            fmt::print(stderr, "warning: {}: fitted to measurements of another machine ({})\n",
                       path, m.machine());
        return m;
    } catch (const Error &e) {
        if (o.rank == "model") throw;
        fmt::print(stderr, "warning: {}; measuring without ranking (--rank none)\n", e.what());
        return std::nullopt;
    }
}

int run_tune(TuneOptions o) {
    const std::vector<Target> todo =
        targets(o.benches, o.matmuls, o.bmms, o.convs, o.scores, o.contexts, o.epilogue);
    const std::optional<looptune::CostModel> model = rank_model(o);
    o.guided.rank = model ? &*model : nullptr;
    Library library(o);
    Tuner tuner;
    nlohmann::json results = nlohmann::json::array();
    std::vector<std::string> labels;
    for (const Target &t : todo) labels.push_back(t.label);
    const int failed = each_benchmark(
        labels, o.json, results, {},
        [&](size_t i) {
            const auto t0 = std::chrono::steady_clock::now();
            const Program start = todo[i].load();
            if (library.lib && !o.retune)
                if (const auto a = looptune::library_answer(*library.lib, library.machine, start)) {
                    const double elapsed = looptool::seconds_since(t0);
                    if (o.json)
                        results.push_back(library_answer_json(*a, library.lib->path(), elapsed));
                    else
                        print_library_answer(*a, library.lib->path(), elapsed);
                    return;
                }
            looptune::Environment &env = tuner.ready(o);
            const looptune::Environment::Counters before = env.counters();
            const looptune::GuidedResult r =
                looptune::guided_search(*tuner.policy, env, start, o.guided);
            const double elapsed = looptool::seconds_since(t0);
            const double compile_s = env.counters().compile_seconds - before.compile_seconds,
                         measure_s = env.counters().measure_seconds - before.measure_seconds;
            const std::string filed =
                library.lib ? looptune::verify_and_file(*library.lib, library.machine, env, start,
                                                        r, LOOPTUNE_VERSION)
                            : "";
            if (o.json) {
                nlohmann::json j = tune_json(start, r, o, tuner.path, env.max_gflops());
                j.update({{"seconds", elapsed},
                          {"compile_seconds", compile_s},
                          {"measure_seconds", measure_s},
                          {"policy_load_seconds", tuner.load_s},
                          {"from_library", false}});
                if (library.lib) j["library"] = {{"path", library.lib->path()}, {"filed", filed}};
                results.push_back(j);
                return;
            }
            print_tune(start, r, o, env.max_gflops(), elapsed, todo.size() == 1);
            print_tune_notes(r, o, elapsed, compile_s, measure_s);
            if (library.lib) fmt::print("  schedule library {}: {}\n", library.lib->path(), filed);
        },
        [](size_t, const std::string &why) { return "FAILED: " + why; });
    if (o.json)
        print_json(results.size() == 1 ? results[0] : results);
    else if (tuner.policy)
        fmt::print("policy {} (loaded in {:.3f} s)\n", tuner.path, tuner.load_s);
    return finish_benchmarks(failed, todo.size());
}

}  // namespace

Run add_tune(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "tune", "Tune benchmarks with a trained policy guiding a small measured search");
    auto o = std::make_shared<TuneOptions>();
    add_tune_options(cmd, *o);
    return [o] { return run_tune(*o); };
}

}  // namespace looptool::cli
