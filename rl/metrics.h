// metrics.csv of a training run: the writer the trainers append to, and the reader next to it
// (the plots, resume's trim and the tests read columns by name, never by position).
// Plain C++ (no LibTorch): the CLI reads it too.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace looptune {

/// One row of metrics.csv. Rates are over the current process's part of the run.
struct MetricsRow {
    double seconds = 0;  ///< wall time of the whole run, resumes included
    int64_t env_steps = 0, episodes = 0, updates = 0;
    double epsilon = 0, episode_reward = 0, episode_speedup = 0, loss = 0;
    double eval_speedup = -1;  ///< -1: no evaluation in this row
    double steps_per_second = 0, updates_per_second = 0;
    /// With seed starts: best of tune's seeds and the policy's rollouts from them / best seed.
    double eval_seed_gain = -1;
};

/// The columns, in file order.
const std::vector<std::string> &metrics_columns();

/// Appends rows to metrics.csv (header written when the file is new or empty).
class MetricsWriter {
public:
    MetricsWriter(const std::string &path, bool append);
    void write(const MetricsRow &r);

private:
    std::ofstream out_;
};

/// A metrics.csv read back: the header's names and the cells of every row.
class MetricsTable {
public:
    /// Throws looptool::Error naming the file (and line) when it cannot be read or parsed.
    static MetricsTable read(const std::string &path);
    size_t rows() const { return cells_.size(); }
    bool has(const std::string &column) const;
    /// The cell as a number; nullopt when it is empty. Throws for an unknown column.
    std::optional<double> value(size_t row, const std::string &column) const;
    /// Every non-empty value of `column` against the same row's `x` column.
    void series(const std::string &x, const std::string &column, std::vector<double> *xs,
                std::vector<double> *ys) const;

    std::vector<std::string> header;

private:
    size_t index(const std::string &column) const;
    std::string path_;
    std::vector<std::vector<std::string>> cells_;
};

/// Keeps the rows of `path` up to `env_steps` (a resume's checkpoint), rewriting the file with
/// today's columns (atomically). Rows past the checkpoint are the ones the resumed run redoes.
/// Returns the number of rows dropped; a missing file is left missing.
size_t trim_metrics(const std::string &path, int64_t env_steps);

}  // namespace looptune
