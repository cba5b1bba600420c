// The first error of several threads, kept with its class: threads hand it over as a
// std::exception_ptr, never as a string, so a bug (looptool::InternalError) still exits 3 and
// bad input (looptool::Error) still exits 1 after crossing a thread (Halide's Error.h manner).
#pragma once

#include <exception>
#include <mutex>
#include <string>

namespace looptune {

/// The first error of any thread, kept with its class (std::exception_ptr), and where it came from.
class FirstError {
public:
    /// Records the exception being handled (call from a catch block); returns false if one was
    /// already recorded.
    bool capture(const std::string &where);
    bool empty() const;
    std::string where() const;
    std::exception_ptr get() const;
    /// Rethrows it with `where: ` before and `suffix` after its message, keeping its class
    /// (looptool::Error or InternalError); any other exception is rethrown as it was.
    [[noreturn]] void rethrow(const std::string &suffix = "") const;

private:
    mutable std::mutex mutex_;
    std::exception_ptr error_;
    std::string where_;
};

}  // namespace looptune
