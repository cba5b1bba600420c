#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "cli/commands.h"
#include "cli/validators.h"
#include "env/environment.h"
#include "looptool/formats/csv.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptool::cli {

struct ValidateOptions {
    std::string file, dataset;
    double tolerance_pct = 20;
    bool json = false;
    looptune::EnvConfig env;
};

namespace {

void add_validate_options(CLI::App *cmd, ValidateOptions &o) {
    cmd->add_option(
           "episodes", o.file,
           "CSV with columns benchmark,actions,gflops (actions separated by spaces or ';'; "
           "header optional)")
        ->required();
    cmd->add_option("--dataset", o.dataset, "Directory to find benchmarks named without a path");
    cmd->add_option("--tolerance-pct", o.tolerance_pct,
                    "Allowed relative GFLOPS difference, percent")
        ->capture_default_str()
        ->check(non_negative());
    add_env_options(cmd, o.env);
    cmd->add_flag("--json", o.json, "Machine-readable output");
}

/// Replays one recorded episode (benchmark, actions, GFLOPS) and compares it: fills `res` with
/// the figures and returns the problems found. Throws Error for an episode it cannot replay.
std::vector<std::string> replay_episode(looptune::Environment &env, const ValidateOptions &o,
                                        const std::vector<std::string> &r, const std::string &where,
                                        nlohmann::json &res) {
    if (r.size() < 3) throw Error(fmt::format("{}: expected 3 fields, got {}", where, r.size()));
    std::string path = r[0];
    if (!o.dataset.empty() && !std::filesystem::exists(path))
        path = (std::filesystem::path(o.dataset) / r[0]).string();
    res["benchmark"] = r[0];
    std::string acts = r[1];
    for (char &ch : acts)
        if (ch == ';') ch = ' ';
    const auto actions = parse_action_list(acts);
    char *end = nullptr;
    const double reported = std::strtod(r[2].c_str(), &end);
    if (end == r[2].c_str() || !std::isfinite(reported) || reported < 0)
        throw Error(fmt::format("{}: '{}' is not a GFLOPS figure", where, r[2]));
    env.reset(path);
    for (size_t s = 0; s < actions.size(); ++s) {
        if (const char *why = why_illegal(env.program(), actions[s]))
            throw Error(fmt::format("{}: step {}: illegal action {}: {}", where, s + 1,
                                    action_name(actions[s]), why));
        env.step(actions[s]);
    }
    const Comparison cmp = env.verify(env.program());
    const double measured = env.gflops();
    const double diff_pct = reported > 0 ? 100 * (measured - reported) / reported : INFINITY;
    res.update({{"reported_gflops", reported},
                {"measured_gflops", measured},
                {"difference_pct", diff_pct},
                {"verified", cmp.ok},
                {"max_error_ratio", cmp.max_error_ratio},
                {"checked_elements", cmp.checked}});
    std::vector<std::string> problems;
    if (!cmp.ok) problems.push_back("numerics differ from the reference: " + cmp.first_mismatch);
    if (std::abs(diff_pct) > o.tolerance_pct)
        problems.push_back(fmt::format("GFLOPS {:.2f} measured vs {:.2f} reported ({:+.1f}%)",
                                       measured, reported, diff_pct));
    return problems;
}

/// One episode's result row; an episode that cannot be replayed is recorded as failed and the
/// others go on.
nlohmann::json validate_episode(looptune::Environment &env, const ValidateOptions &o,
                                const std::vector<std::string> &r, size_t i) {
    const std::string where = fmt::format("{}: episode {}", o.file, i + 1);
    nlohmann::json res{{"episode", i + 1}};
    std::vector<std::string> problems;
    try {
        problems = replay_episode(env, o, r, where, res);
    } catch (const std::exception &e) {
        std::string what = e.what();
        what = what.substr(0, what.find('\n'));
        if (what.rfind(where, 0) != 0) what = where + ": " + what;
        res["failed"] = true;
        res["error"] = what;
        problems.push_back(what);
        fmt::print(stderr, "error: {} (recorded as failed; going on)\n", what);
    }
    res["ok"] = problems.empty();
    res["problems"] = problems;
    if (!o.json) {
        if (problems.empty())
            fmt::print("episode {} ({}): ok, {:.2f} GFLOPS measured vs {:.2f} reported\n", i + 1,
                       res.value("benchmark", std::string("?")), res.value("measured_gflops", 0.0),
                       res.value("reported_gflops", 0.0));
        for (const auto &p : problems) fmt::print("episode {}: DISAGREES: {}\n", i + 1, p);
    }
    return res;
}

int run_validate(const ValidateOptions &o) {
    auto rows = parse_csv(read_file(o.file), o.file);
    if (!rows.empty() && rows[0].fields.size() >= 3 && rows[0].fields[0] == "benchmark")
        rows.erase(rows.begin());
    if (rows.empty()) throw Error(fmt::format("{}: no episodes", o.file));
    looptune::EnvConfig cfg = o.env;
    cfg.reference.progress = true;
    cfg.max_steps = 1 << 30;
    looptune::Environment env(cfg);
    nlohmann::json results = nlohmann::json::array();
    int disagreements = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        results.push_back(validate_episode(env, o, rows[i].fields, i));
        disagreements += !results.back()["ok"].get<bool>();
    }
    if (o.json)
        print_json(
            {{"episodes", rows.size()}, {"disagreements", disagreements}, {"results", results}});
    else
        fmt::print("{} episode{}, {} disagreement{} (GFLOPS tolerance {}%)\n", rows.size(),
                   rows.size() == 1 ? "" : "s", disagreements, disagreements == 1 ? "" : "s",
                   o.tolerance_pct);
    return disagreements == 0 ? 0 : 2;
}

}  // namespace

Run add_validate(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "validate",
        "Replay recorded episodes (benchmark, actions, GFLOPS): check numerics and GFLOPS");
    auto o = std::make_shared<ValidateOptions>();
    add_validate_options(cmd, *o);
    return [o] { return run_validate(*o); };
}

}  // namespace looptool::cli
