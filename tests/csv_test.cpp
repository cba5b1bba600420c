// The one CSV reader: RFC 4180 quoting, the line each record starts on, blank lines skipped,
// an unterminated quote named with its file and line.
#include <gtest/gtest.h>

#include "looptool/formats/csv.h"
#include "looptool/ir/error.h"

using namespace looptool;

TEST(Csv, QuotesCommasAndLineNumbers) {
    const auto rows = parse_csv(
        "benchmark,actions,gflops\r\n"
        "mm8_8_8,\"split_4,down\",3.5\n"
        "\n"
        "\"a \"\"quoted\"\" name\",\"two\nlines\",\n"
        "last,row,1",
        "episodes.csv");
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[0].line, 1);
    EXPECT_EQ(rows[0].fields, csv_header("benchmark,actions,gflops"));
    EXPECT_EQ(rows[1].line, 2);
    EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"mm8_8_8", "split_4,down", "3.5"}));
    EXPECT_EQ(rows[2].line, 4);  // line 3 is blank
    EXPECT_EQ(rows[2].fields, (std::vector<std::string>{"a \"quoted\" name", "two\nlines", ""}));
    EXPECT_EQ(rows[3].line, 6);  // the quoted field spanned lines 4 and 5
    EXPECT_EQ(rows[3].fields, (std::vector<std::string>{"last", "row", "1"}));
}

TEST(Csv, AnUnterminatedQuoteNamesTheFileAndTheRecordsLine) {
    try {
        parse_csv("a,b\nc,\"open\nstill open", "t.csv");
        FAIL() << "accepted an unterminated quote";
    } catch (const Error &e) {
        EXPECT_STREQ(e.what(), "t.csv:2: unterminated quoted field");
    }
}
