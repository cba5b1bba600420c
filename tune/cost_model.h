// A cost model of this machine, fitted to its measurement store, that ranks schedules before
// they are measured (tune --rank model), as Ansor and MetaSchedule rank theirs.
//
// The features come from a schedule's canonical key alone (looptool::schedule_key(): the
// computation's extents, packed copies and every loop's variable, size, tail and annotations),
// so every row of a store is a training example without its benchmark file. The model is ridge
// regression on the standardised features, predicting log GFLOPS relative to the mean of the
// benchmark's rows: only the order of a benchmark's schedules is wanted, and a closed-form
// linear fit has no training schedule to tune and fits thousands of rows in milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptune {

/// Names of the features schedule_features() computes, in order (a saved model lists them, so a
/// model of other features is refused).
const std::vector<std::string> &schedule_feature_names();
/// The features of the schedule with this key. Throws looptool::Error for a malformed key.
std::vector<double> schedule_features(const std::string &schedule_key);

/// One measured schedule: its benchmark, key and GFLOPS.
struct CostSample {
    std::string benchmark, schedule;
    double gflops = 0;
};

/// How well the model orders schedules it was not fitted to: benchmarks are split into
/// kCostFolds groups, each predicted by a model fitted to the others; the mean over benchmarks
/// (with at least 3 schedules) of the Spearman rank correlation between predicted and measured.
struct CostFit {
    int64_t rows = 0, benchmarks = 0;
    double lambda = 0;
    double heldout_spearman = 0;
};
inline constexpr int kCostFolds = 5;
/// A store with fewer usable rows (GFLOPS > 0, benchmarks with at least two schedules) is
/// refused: a ridge fit of this many features on fewer rows ranks by noise.
inline constexpr int64_t kMinCostRows = 200;

class CostModel {
public:
    /// Fits the model to `samples` (measured on one machine, `machine`), choosing the ridge
    /// penalty by the held-out rank correlation. Throws looptool::Error when fewer than
    /// kMinCostRows rows are usable.
    static CostModel fit(const std::vector<CostSample> &samples, const std::string &machine);
    /// Reads a model written by save(). Throws looptool::Error naming the file when it is
    /// missing, not a cost model, of other features, or holds a non-finite number.
    static CostModel load(const std::string &path);
    /// Writes the model as JSON under a temporary name renamed at the end.
    void save(const std::string &path) const;

    /// Predicted log GFLOPS, relative to the benchmark's mean: only the order means something.
    double score(const std::string &schedule_key) const;
    double score(const looptool::Program &p) const;

    const std::string &machine() const { return machine_; }
    const CostFit &fit_quality() const { return fit_; }
    /// Where the model was fitted from (a store's path), as saved.
    const std::string &source() const { return source_; }
    void set_source(const std::string &s) { source_ = s; }

private:
    std::vector<double> mean_, scale_, weights_;
    std::string machine_, source_;
    CostFit fit_;
};

/// Fits a model to every row of the store at `store_path` measured on `machine`.
CostModel fit_cost_model_from_store(const std::string &store_path, const std::string &machine);

/// Where this machine's cost model lives: $XDG_CACHE_HOME/looptune/cost_models/ (else
/// ~/.cache/...) named after machine_fingerprint(); "" when there is no cache directory.
std::string default_cost_model_path();

/// Spearman rank correlation of two equally long lists (ties get their mean rank); 0 when
/// either is constant or they hold fewer than two values.
double spearman(const std::vector<double> &a, const std::vector<double> &b);

}  // namespace looptune
