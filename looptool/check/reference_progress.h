// The last line of the reference's progress. With ReferenceOptions::progress, computing a
// reference prints "reference: N% of ..." on stderr once a second after its first second, and
// stops wherever the work ends: the last line read "76%". The caller ends them with a line that
// says the reference is complete.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace looptool {

class ReferenceProgressEnd {
public:
    explicit ReferenceProgressEnd(bool on) : on_(on), start_(std::chrono::steady_clock::now()) {}
    /// Call once the reference is complete: one line when progress lines may have been printed.
    void done() const {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        if (on_ && s >= 1) fmt::print(stderr, "reference: 100%, done in {:.1f} s\n", s);
    }

private:
    bool on_;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace looptool
