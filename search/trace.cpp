#include "search/trace.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "looptool/formats/csv.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptune {

static const char *kHeader = "benchmark,algo,gflops,base_gflops,actions";

static std::string row(const Trace &t) {
    std::string actions;
    for (looptool::Action a : t.actions)
        actions += (actions.empty() ? "" : " ") + std::string(looptool::action_name(a));
    if (t.benchmark.find(',') != std::string::npos)
        throw looptool::Error("benchmark path contains a comma: " + t.benchmark);
    return fmt::format("{},{},{:.4f},{:.4f},{}", t.benchmark, t.algo, t.gflops, t.base_gflops,
                       actions);
}

// A directory opens as an empty stream: say what it is instead of "empty trace file".
static void check_not_directory(const std::string &path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw looptool::Error(path + ": is a directory, not a trace file (give a CSV file path)");
}

void append_traces(const std::string &path, const std::vector<Trace> &traces) {
    check_not_directory(path);
    std::string text;
    if (std::ifstream in(path); in) {
        std::stringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    }
    if (text.empty()) text = std::string(kHeader) + "\n";
    if (text.back() != '\n') text += '\n';
    for (const Trace &t : traces) text += row(t) + "\n";
    looptool::write_file_atomically(path, text);
}

// A GFLOPS figure: a finite number > 0 (a NaN compared as a trace worth imitating, and a base
// of 0 made every trace infinitely good).
static double gflops_field(const std::string &text, const std::string &path, int line_no,
                           const char *column) {
    double v = 0;
    size_t used = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception &) {
        used = 0;
    }
    if (used == 0 || used != text.size() || !std::isfinite(v) || !(v > 0))
        throw looptool::Error(
            fmt::format("{}:{}: {} '{}' is not a finite number > 0", path, line_no, column, text));
    return v;
}

std::vector<Trace> load_traces(const std::string &path) {
    check_not_directory(path);
    std::ifstream in(path);
    if (!in) throw looptool::Error("cannot open trace file " + path);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::vector<looptool::CsvRow> rows = looptool::parse_csv(text, path);
    if (rows.empty()) throw looptool::Error("empty trace file " + path);
    if (rows[0].line != 1 || rows[0].fields != looptool::csv_header(kHeader))
        throw looptool::Error(
            fmt::format("{}:1: not a trace file (expected header '{}')", path, kHeader));
    std::vector<Trace> out;
    for (size_t i = 1; i < rows.size(); ++i) {
        const auto &[line_no, f] = rows[i];
        if (f.size() != 5)
            throw looptool::Error(
                fmt::format("{}:{}: expected 5 fields, got {}", path, line_no, f.size()));
        Trace t;
        t.benchmark = f[0];
        t.algo = f[1];
        t.gflops = gflops_field(f[2], path, line_no, "gflops");
        t.base_gflops = gflops_field(f[3], path, line_no, "base_gflops");
        try {
            t.actions = looptool::parse_action_list(f[4]);
        } catch (const looptool::Error &e) {
            throw looptool::Error(fmt::format("{}:{}: {}", path, line_no, e.what()));
        }
        out.push_back(std::move(t));
    }
    return out;
}

}  // namespace looptune

namespace looptune {

static bool reaches(const looptool::Program &start, const std::vector<looptool::Action> &actions,
                    looptool::Program *out) {
    looptool::Program p = start;
    for (looptool::Action a : actions) {
        looptool::ApplyResult r = looptool::try_apply(p, a);
        if (!r.applied) return false;
        p = std::move(r.program);
    }
    *out = std::move(p);
    return true;
}

std::vector<looptool::Action> drop_cancelling_moves(const looptool::Program &start,
                                                    const std::vector<looptool::Action> &actions) {
    using looptool::Action;
    looptool::Program goal;
    if (!reaches(start, actions, &goal)) return actions;
    std::vector<Action> cur = actions;
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i + 1 < cur.size(); ++i) {
            const bool cancel = (cur[i] == Action::Up && cur[i + 1] == Action::Down) ||
                                (cur[i] == Action::Down && cur[i + 1] == Action::Up);
            if (!cancel) continue;
            std::vector<Action> shorter = cur;
            shorter.erase(shorter.begin() + i, shorter.begin() + i + 2);
            looptool::Program p;
            if (reaches(start, shorter, &p) &&
                looptool::schedule_key(p) == looptool::schedule_key(goal) &&
                p.cursor == goal.cursor) {
                cur = std::move(shorter);
                changed = true;
                break;
            }
        }
    }
    return cur;
}

}  // namespace looptune
