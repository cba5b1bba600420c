// Error channels (see docs/actions.md):
//  - an action that cannot apply is an ordinary result (ApplyResult in actions.h);
//  - bad user input, bad files and JIT failures throw looptool::Error;
//  - broken invariants hit LT_CHECK, which throws InternalError.
// And one way to say that something was skipped or degraded but the run goes on: warn().
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace looptool {

/// Bad input from a user or a file, or a failure of an external component.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
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

#define LT_CHECK(cond, msg)                                                              \
    do {                                                                                 \
        if (!(cond)) ::looptool::internal_check_failed(#cond, __FILE__, __LINE__, (msg)); \
    } while (0)
