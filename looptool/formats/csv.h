// The one CSV reader (RFC 4180: commas separate fields, double quotes quote, "" is a quote,
// CRLF or LF ends a record, blank lines are skipped) for every CSV the tool reads back: actions
// episodes (validate), search traces, metrics.csv and compare's results.csv.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace looptool {

struct CsvRow {
    int line = 0;  ///< 1-based line where the record starts
    std::vector<std::string> fields;
};

/// Parses `text`; throws Error naming `source` and the line of an unterminated quoted field.
std::vector<CsvRow> parse_csv(std::string_view text, const std::string &source);

/// The fields of a one-line header constant ("a,b,c").
std::vector<std::string> csv_header(std::string_view header);

}  // namespace looptool
