#include "experiments/compare_rows.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "looptool/formats/csv.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptune {

using looptool::Error;
namespace fs = std::filesystem;

namespace {

const char *kHeader =
    "benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops,"
    "judged_gflops,error";
// Results written before the judge's rounds (2026-11-26): no `judged_gflops`.
const char *kHeaderV2 =
    "benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops,error";
// Results written before failed rows were recorded: no `error` either.
const char *kHeaderV1 =
    "benchmark,method,gflops,fraction_of_peak,speedup,seconds,schedules,actions,step_gflops";

std::string join(const std::vector<double> &v) {
    std::string s;
    for (double x : v) s += fmt::format("{}{:.4f}", s.empty() ? "" : " ", x);
    return s;
}

std::string row_csv(const CompareRow &r) {
    return fmt::format("{},{},{:.4f},{:.5f},{:.4f},{:.4f},{},{},{},{},{}", r.benchmark, r.method,
                       r.gflops, r.fraction_of_peak, r.speedup, r.seconds, r.schedules, r.actions,
                       join(r.step_gflops), join(r.judged_gflops), r.error);
}

// The fields per row of the file whose first row is `first` (9, 10 or 11).
size_t fields_of(const looptool::CsvRow &first, const std::string &path) {
    if (first.line == 1 && first.fields == looptool::csv_header(kHeaderV1)) return 9;
    if (first.line == 1 && first.fields == looptool::csv_header(kHeaderV2)) return 10;
    if (first.line != 1 || first.fields != looptool::csv_header(kHeader))
        throw Error(
            fmt::format("{}: not a looptool compare results file (header differs); "
                        "use another --out directory",
                        path));
    return 11;
}

CompareRow parse_row(const std::vector<std::string> &f, size_t fields) {
    CompareRow r{f[0],
                 f[1],
                 std::stod(f[2]),
                 std::stod(f[3]),
                 std::stod(f[4]),
                 std::stod(f[5]),
                 std::stoll(f[6]),
                 f[7],
                 {},
                 {},
                 fields >= 10 ? f[fields - 1] : ""};
    std::istringstream steps(f[8]);
    for (double x; steps >> x;) r.step_gflops.push_back(x);
    std::istringstream judged(fields == 11 ? f[9] : "");
    for (double x; judged >> x;) r.judged_gflops.push_back(x);
    return r;
}

}  // namespace

std::string one_field(const std::string &why) {
    std::string s = why.substr(0, why.find('\n'));
    for (char &ch : s)
        if (ch == ',')
            ch = ';';
        else if (ch == '\r')
            ch = ' ';
    return s.empty() ? "failed" : s;
}

std::vector<CompareRow> read_rows(const std::string &path) {
    std::vector<CompareRow> rows;
    if (!fs::exists(path)) return rows;
    const std::vector<looptool::CsvRow> csv = looptool::parse_csv(looptool::read_file(path), path);
    if (csv.empty()) return rows;
    const size_t fields = fields_of(csv[0], path);
    for (size_t i = 1; i < csv.size(); ++i) {
        const auto &[lineno, f] = csv[i];
        if (f.size() != fields)
            throw Error(
                fmt::format("{}:{}: expected {} fields, got {}", path, lineno, fields, f.size()));
        try {
            rows.push_back(parse_row(f, fields));
        } catch (const std::exception &) {
            throw Error(fmt::format("{}:{}: malformed number", path, lineno));
        }
    }
    return rows;
}

void write_rows(const std::string &path, const std::vector<CompareRow> &rows) {
    fs::create_directories(fs::path(path).parent_path());  // only once there is a row to write
    std::string s = std::string(kHeader) + "\n";
    for (const auto &r : rows) s += row_csv(r) + "\n";
    looptool::write_file_atomically(path, s);
}

}  // namespace looptune
