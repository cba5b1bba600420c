#include "looptool/formats/csv.h"

#include <fmt/format.h>

#include "looptool/ir/error.h"

namespace looptool {

std::vector<CsvRow> parse_csv(std::string_view text, const std::string &source) {
    std::vector<CsvRow> rows;
    CsvRow row;
    std::string field;
    bool quoted = false, any = false;
    int line = 1;
    row.line = 1;
    auto end_record = [&] {
        if (any || !field.empty()) {
            row.fields.push_back(field);
            rows.push_back(std::move(row));
        }
        row = CsvRow{};
        field.clear();
        any = false;
    };
    for (size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        if (quoted) {
            if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"')
                field += '"', ++i;
            else if (ch == '"')
                quoted = false;
            else
                field += ch, line += ch == '\n';
        } else if (ch == '"') {
            quoted = any = true;
        } else if (ch == ',') {
            row.fields.push_back(field), field.clear(), any = true;
        } else if (ch == '\n' || ch == '\r') {
            if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
            end_record();
            row.line = ++line;
        } else {
            field += ch, any = true;
        }
    }
    if (quoted) throw Error(fmt::format("{}:{}: unterminated quoted field", source, row.line));
    end_record();
    return rows;
}

std::vector<std::string> csv_header(std::string_view header) {
    auto rows = parse_csv(header, "header");
    return rows.empty() ? std::vector<std::string>{} : rows[0].fields;
}

}  // namespace looptool
