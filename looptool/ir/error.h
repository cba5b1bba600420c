// Error channels (see docs/actions.md):
//  - an action that cannot apply is an ordinary result (ApplyResult in actions.h);
//  - bad user input, bad files and JIT failures throw looptool::Error;
//  - broken invariants hit LT_CHECK, which throws InternalError.
// And one way to say that something was skipped or degraded but the run goes on: warn().
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace looptool {

/// `text` with control characters other than newline and tab written as \xNN, so that file
/// content quoted in a message shows whole: a NUL byte used to end the message there (what()
/// is a C string), a carriage return or an escape sequence to garble the terminal.
inline std::string escape_controls(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char ch : text) {
        const auto u = static_cast<unsigned char>(ch);
        if ((u < 0x20 && ch != '\n' && ch != '\t') || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out;
}

/// Bad input from a user or a file, or a failure of an external component. The message is
/// escaped here, the one place every quoted piece of file content passes through.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string &what) : std::runtime_error(escape_controls(what)) {}
    explicit Error(const char *what) : std::runtime_error(escape_controls(what)) {}
};

/// A broken invariant: a bug in looptool itself.
class InternalError : public std::logic_error {
public:
    using std::logic_error::logic_error;
};

/// Prints "warning: <msg>" as one line on stderr. One write per call, so the lines of
/// concurrent threads (Ape-X actors) do not interleave mid-line.
void warn(std::string_view msg);

[[noreturn]] void internal_check_failed(const char *cond, const char *file, int line,
                                        const std::string &msg);

}  // namespace looptool

#define LT_CHECK(cond, msg)                                                               \
    do {                                                                                  \
        if (!(cond)) ::looptool::internal_check_failed(#cond, __FILE__, __LINE__, (msg)); \
    } while (0)
