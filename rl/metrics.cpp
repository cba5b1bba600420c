#include "rl/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "looptool/formats/csv.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptune {

const std::vector<std::string> &metrics_columns() {
    static const std::vector<std::string> columns = {
        "seconds",      "env_steps",        "episodes",           "updates",
        "epsilon",      "episode_reward",   "episode_speedup",    "loss",
        "eval_speedup", "steps_per_second", "updates_per_second", "eval_seed_gain"};
    return columns;
}

static std::string header_line() {
    std::string h;
    for (const std::string &c : metrics_columns()) {
        if (!h.empty()) h += ',';
        h += c;
    }
    return h + "\n";
}

static std::string format_row(const MetricsRow &r) {
    return fmt::format(
        "{:.1f},{},{},{},{:.4f},{:.5f},{:.4f},{:.6f},{},{:.2f},{:.2f},{}\n", r.seconds, r.env_steps,
        r.episodes, r.updates, r.epsilon, r.episode_reward, r.episode_speedup, r.loss,
        r.eval_speedup < 0 ? std::string() : fmt::format("{:.4f}", r.eval_speedup),
        r.steps_per_second, r.updates_per_second,
        r.eval_seed_gain < 0 ? std::string() : fmt::format("{:.4f}", r.eval_seed_gain));
}

MetricsWriter::MetricsWriter(const std::string &path, bool append) {
    const bool fresh =
        !append || !std::filesystem::exists(path) || std::filesystem::file_size(path) == 0;
    out_.open(path, fresh ? std::ios::trunc : std::ios::app);
    if (!out_) throw looptool::Error("cannot write " + path);
    if (fresh) out_ << header_line();
    out_.flush();
}

void MetricsWriter::write(const MetricsRow &r) {
    out_ << format_row(r);
    out_.flush();
}

MetricsTable MetricsTable::read(const std::string &path) {
    MetricsTable t;
    t.path_ = path;
    std::ifstream in(path);
    if (!in) throw looptool::Error("cannot open metrics file " + path);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::vector<looptool::CsvRow> rows = looptool::parse_csv(text, path);
    if (rows.empty() || rows[0].line != 1)
        throw looptool::Error(path + ": empty metrics file (no header)");
    t.header = std::move(rows[0].fields);
    for (size_t i = 1; i < rows.size(); ++i) {
        const int n = rows[i].line;
        std::vector<std::string> &cells = rows[i].fields;
        // A row cut short by a kill mid-write is dropped; a longer one is not ours.
        if (cells.size() > t.header.size())
            throw looptool::Error(fmt::format("{}:{}: {} cells, the header has {}", path, n,
                                              cells.size(), t.header.size()));
        if (cells.size() < t.header.size()) continue;
        t.cells_.push_back(std::move(cells));
    }
    return t;
}

bool MetricsTable::has(const std::string &column) const {
    return std::find(header.begin(), header.end(), column) != header.end();
}

size_t MetricsTable::index(const std::string &column) const {
    auto it = std::find(header.begin(), header.end(), column);
    if (it == header.end()) throw looptool::Error(path_ + ": no column '" + column + "'");
    return static_cast<size_t>(it - header.begin());
}

std::optional<double> MetricsTable::value(size_t row, const std::string &column) const {
    LT_CHECK(row < rows(), "metrics row out of range");
    const std::string &cell = cells_[row][index(column)];
    if (cell.empty()) return std::nullopt;
    char *end = nullptr;
    const double v = std::strtod(cell.c_str(), &end);
    if (end != cell.c_str() + cell.size())
        throw looptool::Error(fmt::format("{}: row {}: '{}' in column {} is not a number", path_,
                                          row + 1, cell, column));
    return v;
}

void MetricsTable::series(const std::string &x, const std::string &column, std::vector<double> *xs,
                          std::vector<double> *ys) const {
    for (size_t r = 0; r < rows(); ++r) {
        const std::optional<double> vx = value(r, x), vy = value(r, column);
        if (!vx || !vy) continue;
        xs->push_back(*vx);
        ys->push_back(*vy);
    }
}

size_t trim_metrics(const std::string &path, int64_t env_steps) {
    if (!std::filesystem::exists(path) || std::filesystem::file_size(path) == 0) return 0;
    const MetricsTable old = MetricsTable::read(path);
    std::string out = header_line();
    size_t dropped = 0;
    for (size_t r = 0; r < old.rows(); ++r) {
        if (old.value(r, "env_steps").value_or(0) > static_cast<double>(env_steps)) {
            ++dropped;
            continue;
        }
        // Today's columns; those an older file lacks stay empty.
        for (size_t i = 0; i < metrics_columns().size(); ++i) {
            const std::string &name = metrics_columns()[i];
            std::optional<double> v = old.has(name) ? old.value(r, name) : std::nullopt;
            if (i) out += ',';
            if (v) out += fmt::format("{}", *v);
        }
        out += "\n";
    }
    looptool::write_file_atomically(path, out);
    return dropped;
}

}  // namespace looptune
