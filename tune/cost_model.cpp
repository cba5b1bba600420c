// Ridge regression over schedule_features() (cost_model.h): fit, held-out ranking, file.
#include "tune/cost_model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "env/store/measurement_store.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "util/cache_dir.h"

namespace looptune {

namespace {

constexpr const char *kFormat = "looptune-cost-model";
constexpr int kVersion = 1;
/// Ridge penalties tried (on standardised features; the fit has one per feature row).
constexpr double kLambdas[] = {0.1, 1, 10, 100, 1000, 10000};

/// The rows a fit uses: GFLOPS > 0, of benchmarks with at least two such schedules; features,
/// log GFLOPS relative to the benchmark's mean, and each row's benchmark index.
struct Rows {
    std::vector<std::vector<double>> x;
    std::vector<double> y;
    std::vector<size_t> bench;
    size_t benchmarks = 0;
};

Rows usable_rows(const std::vector<CostSample> &samples) {
    std::map<std::string, std::vector<const CostSample *>> by_bench;
    for (const CostSample &s : samples)
        if (s.gflops > 0 && std::isfinite(s.gflops)) by_bench[s.benchmark].push_back(&s);
    Rows r;
    for (const auto &[name, list] : by_bench) {
        if (list.size() < 2) continue;
        double mean = 0;
        for (const CostSample *s : list) mean += std::log(s->gflops);
        mean /= double(list.size());
        for (const CostSample *s : list) {
            r.x.push_back(schedule_features(s->schedule));
            r.y.push_back(std::log(s->gflops) - mean);
            r.bench.push_back(r.benchmarks);
        }
        ++r.benchmarks;
    }
    return r;
}

/// Solves A w = b (A symmetric positive definite, n x n row-major) by Cholesky.
std::vector<double> solve_spd(std::vector<double> a, std::vector<double> b, size_t n) {
    for (size_t j = 0; j < n; ++j) {
        double d = a[j * n + j];
        for (size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0))
            throw looptool::Error("cost model: the ridge system is not positive definite");
        a[j * n + j] = std::sqrt(d);
        for (size_t i = j + 1; i < n; ++i) {
            double v = a[i * n + j];
            for (size_t k = 0; k < j; ++k) v -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = v / a[j * n + j];
        }
    }
    for (size_t i = 0; i < n; ++i) {  // L z = b
        for (size_t k = 0; k < i; ++k) b[i] -= a[i * n + k] * b[k];
        b[i] /= a[i * n + i];
    }
    for (size_t i = n; i-- > 0;) {  // L^T w = z
        for (size_t k = i + 1; k < n; ++k) b[i] -= a[k * n + i] * b[k];
        b[i] /= a[i * n + i];
    }
    return b;
}

struct Linear {
    std::vector<double> mean, scale, w;
    double bias = 0;
    double predict(const std::vector<double> &x) const {
        double s = bias;
        for (size_t i = 0; i < w.size(); ++i) s += w[i] * (x[i] - mean[i]) / scale[i];
        return s;
    }
};

/// Ridge fit to the rows with keep[i]; the bias (the mean target) is not penalised.
Linear ridge(const Rows &r, const std::vector<bool> &keep, double lambda) {
    const size_t n = r.x.front().size();
    Linear m{std::vector<double>(n, 0), std::vector<double>(n, 0), {}, 0};
    double count = 0;
    for (size_t i = 0; i < r.x.size(); ++i)
        if (keep[i]) {
            for (size_t j = 0; j < n; ++j) m.mean[j] += r.x[i][j];
            m.bias += r.y[i];
            ++count;
        }
    for (size_t j = 0; j < n; ++j) m.mean[j] /= count;
    m.bias /= count;
    for (size_t i = 0; i < r.x.size(); ++i)
        if (keep[i])
            for (size_t j = 0; j < n; ++j) m.scale[j] += std::pow(r.x[i][j] - m.mean[j], 2);
    // A constant feature gets scale 1: its standardised value is 0 everywhere.
    for (double &s : m.scale) s = s > 0 ? std::sqrt(s / count) : 1;
    std::vector<double> a(n * n, 0), b(n, 0), z(n);
    for (size_t i = 0; i < r.x.size(); ++i) {
        if (!keep[i]) continue;
        for (size_t j = 0; j < n; ++j) z[j] = (r.x[i][j] - m.mean[j]) / m.scale[j];
        for (size_t j = 0; j < n; ++j) {
            b[j] += z[j] * (r.y[i] - m.bias);
            for (size_t k = 0; k < n; ++k) a[j * n + k] += z[j] * z[k];
        }
    }
    for (size_t j = 0; j < n; ++j) a[j * n + j] += lambda;
    m.w = solve_spd(std::move(a), std::move(b), n);
    return m;
}

/// Mean Spearman correlation over benchmarks (with at least 3 rows) of predictions made by
/// models fitted without the benchmark's fold.
double heldout_spearman(const Rows &r, double lambda) {
    std::vector<double> pred(r.y.size());
    for (int fold = 0; fold < kCostFolds; ++fold) {
        std::vector<bool> keep(r.y.size());
        for (size_t i = 0; i < r.y.size(); ++i) keep[i] = int(r.bench[i] % kCostFolds) != fold;
        if (std::none_of(keep.begin(), keep.end(), [](bool k) { return k; })) continue;
        const Linear m = ridge(r, keep, lambda);
        for (size_t i = 0; i < r.y.size(); ++i)
            if (!keep[i]) pred[i] = m.predict(r.x[i]);
    }
    std::vector<std::vector<double>> p(r.benchmarks), y(r.benchmarks);
    for (size_t i = 0; i < r.y.size(); ++i) {
        p[r.bench[i]].push_back(pred[i]);
        y[r.bench[i]].push_back(r.y[i]);
    }
    double sum = 0;
    int counted = 0;
    for (size_t b = 0; b < r.benchmarks; ++b)
        if (p[b].size() >= 3) {
            sum += spearman(p[b], y[b]);
            ++counted;
        }
    return counted ? sum / counted : 0;
}

std::vector<double> ranks(const std::vector<double> &v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
        for (size_t k = i; k <= j; ++k) r[order[k]] = 0.5 * double(i + j);
        i = j + 1;
    }
    return r;
}

}  // namespace

double spearman(const std::vector<double> &a, const std::vector<double> &b) {
    if (a.size() != b.size() || a.size() < 2) return 0;
    const std::vector<double> ra = ranks(a), rb = ranks(b);
    const double mean = 0.5 * double(a.size() - 1);
    double sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        sab += (ra[i] - mean) * (rb[i] - mean);
        saa += (ra[i] - mean) * (ra[i] - mean);
        sbb += (rb[i] - mean) * (rb[i] - mean);
    }
    return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

CostModel CostModel::fit(const std::vector<CostSample> &samples, const std::string &machine) {
    const Rows r = usable_rows(samples);
    if (int64_t(r.y.size()) < kMinCostRows)
        throw looptool::Error(fmt::format(
            "cost model: {} usable measurements (GFLOPS > 0, benchmarks with two schedules at "
            "least) of {}; at least {} are needed",
            r.y.size(), samples.size(), kMinCostRows));
    CostModel m;
    m.machine_ = machine;
    m.fit_.rows = int64_t(r.y.size());
    m.fit_.benchmarks = int64_t(r.benchmarks);
    m.fit_.heldout_spearman = -2;
    for (double lambda : kLambdas)
        if (const double s = heldout_spearman(r, lambda); s > m.fit_.heldout_spearman) {
            m.fit_.heldout_spearman = s;
            m.fit_.lambda = lambda;
        }
    const Linear l = ridge(r, std::vector<bool>(r.y.size(), true), m.fit_.lambda);
    m.mean_ = l.mean;
    m.scale_ = l.scale;
    m.weights_ = l.w;
    return m;
}

double CostModel::score(const std::string &schedule_key) const {
    const std::vector<double> x = schedule_features(schedule_key);
    double s = 0;
    for (size_t i = 0; i < weights_.size(); ++i) s += weights_[i] * (x[i] - mean_[i]) / scale_[i];
    return s;
}

double CostModel::score(const looptool::Program &p) const {
    return score(looptool::schedule_key(p));
}

void CostModel::save(const std::string &path) const {
    const nlohmann::json j = {{"format", kFormat},
                              {"version", kVersion},
                              {"machine", machine_},
                              {"source", source_},
                              {"features", schedule_feature_names()},
                              {"mean", mean_},
                              {"scale", scale_},
                              {"weights", weights_},
                              {"rows", fit_.rows},
                              {"benchmarks", fit_.benchmarks},
                              {"lambda", fit_.lambda},
                              {"heldout_spearman", fit_.heldout_spearman}};
    const std::filesystem::path target(path);
    if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        out << j.dump(1) << "\n";
        if (!out) throw looptool::Error(fmt::format("{}: cannot write the cost model", tmp));
    }
    std::filesystem::rename(tmp, path);
}

CostModel CostModel::load(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw looptool::Error(fmt::format("{}: cannot read the cost model", path));
    CostModel m;
    try {
        const nlohmann::json j = nlohmann::json::parse(in);
        if (j.at("format") != kFormat || j.at("version") != kVersion)
            throw looptool::Error("not a version-1 looptune cost model");
        if (j.at("features").get<std::vector<std::string>>() != schedule_feature_names())
            throw looptool::Error("fitted to other features than this looptool computes");
        m.machine_ = j.at("machine").get<std::string>();
        m.source_ = j.at("source").get<std::string>();
        m.mean_ = j.at("mean").get<std::vector<double>>();
        m.scale_ = j.at("scale").get<std::vector<double>>();
        m.weights_ = j.at("weights").get<std::vector<double>>();
        m.fit_ = {j.at("rows").get<int64_t>(), j.at("benchmarks").get<int64_t>(),
                  j.at("lambda").get<double>(), j.at("heldout_spearman").get<double>()};
    } catch (const nlohmann::json::exception &e) {
        throw looptool::Error(fmt::format("{}: not a looptune cost model: {}", path, e.what()));
    } catch (const looptool::Error &e) {
        throw looptool::Error(fmt::format("{}: {}", path, e.what()));
    }
    const size_t n = schedule_feature_names().size();
    auto finite = [](const std::vector<double> &v) {
        return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
    };
    if (m.mean_.size() != n || m.scale_.size() != n || m.weights_.size() != n || !finite(m.mean_) ||
        !finite(m.scale_) || !finite(m.weights_) ||
        std::any_of(m.scale_.begin(), m.scale_.end(), [](double s) { return !(s > 0); }))
        throw looptool::Error(fmt::format(
            "{}: a damaged cost model: {} finite weights, means and positive scales expected", path,
            n));
    return m;
}

CostModel fit_cost_model_from_store(const std::string &store_path, const std::string &machine) {
    const auto store = MeasurementStore::open_read_only(store_path);
    std::vector<CostSample> samples;
    std::vector<MeasurementStore::Row> rows = store->rows(machine);
    if (rows.empty())
        throw looptool::Error(
            fmt::format("{}: no measurements of this machine ({})", store_path, machine));
    for (MeasurementStore::Row &row : rows)
        samples.push_back({std::move(row.benchmark), std::move(row.schedule), row.median_gflops});
    try {
        CostModel m = CostModel::fit(samples, machine);
        m.set_source(store_path);
        return m;
    } catch (const looptool::Error &e) {
        throw looptool::Error(fmt::format("{}: {}", store_path, e.what()));
    }
}

std::string default_cost_model_path() {
    const std::string dir = looptune_cache_dir();
    if (dir.empty()) return "";
    return dir + "/cost_models/" +
           file_name_from(machine_fingerprint(looptool::machine_peak_gflops())) + ".json";
}

}  // namespace looptune
