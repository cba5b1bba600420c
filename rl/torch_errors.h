// LibTorch's errors (c10::Error) carry a C++ backtrace of ~30 lines after their message. Above
// agents/ every error is one looptool::Error line, so each agents/ entry point that runs LibTorch
// code (train, loading and acting with a policy) wraps it in one_line_torch_errors.
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include "looptool/ir/error.h"

namespace looptune {

/// The first line of a LibTorch error's message, without its backtrace.
inline std::string torch_error_line(const c10::Error &e) {
    std::string what = e.what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    return what.empty() ? std::string("LibTorch error") : "LibTorch: " + what;
}

/// Runs f; a c10::Error escaping it becomes looptool::Error(torch_error_line(e)).
template <class F>
auto one_line_torch_errors(F &&f) -> decltype(f()) {
    try {
        return f();
    } catch (const c10::Error &e) {
        throw looptool::Error(torch_error_line(e));
    }
}

}  // namespace looptune
