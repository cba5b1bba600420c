#include "looptool/ir/error.h"

#include <fmt/format.h>

#include <cstdio>

namespace looptool {

void warn(std::string_view msg) {
    const std::string line = fmt::format("warning: {}\n", msg);
    // stdio locks stderr for the whole call; stderr is unbuffered, so this is one write.
    std::fwrite(line.data(), 1, line.size(), stderr);
}

void internal_check_failed(const char *cond, const char *file, int line, const std::string &msg) {
    throw InternalError(
        fmt::format("internal error at {}:{}: check `{}` failed: {}", file, line, cond, msg));
}

}  // namespace looptool
