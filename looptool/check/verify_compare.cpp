// The comparison of a kernel's outputs with the reference (verify.h): each element within its
// bound, or of the same NaN/infinity class; an element without a finite bound fails.
#include "looptool/check/verify.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>

#include "looptool/ir/error.h"

namespace looptool {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string coords(const Tensor &t, int64_t f) {
    std::vector<int64_t> c(t.shape.size());
    for (size_t d = t.shape.size(); d-- > 0;) c[d] = f % t.shape[d], f /= t.shape[d];
    return fmt::format("{}", fmt::join(c, ","));
}
}  // namespace

std::string Comparison::coverage() const {
    if (checked == total) return fmt::format("all {} output elements", total);
    return fmt::format("a random sample of {} of {} output elements", checked, total);
}

std::string Comparison::failures(double tolerance) const {
    const int64_t beyond = mismatches - unbounded;
    std::string s = fmt::format("{} of {} fail", mismatches, coverage());
    if (beyond > 0) s += fmt::format(": {} differ beyond {} x the error bound", beyond, tolerance);
    if (unbounded > 0)
        s += fmt::format("{} {} cannot be checked (no finite error bound)", beyond > 0 ? "," : ":",
                         unbounded);
    return s;
}

void check_tolerance(double tolerance, const std::string &what) {
    if (!std::isfinite(tolerance) || tolerance < 0)
        throw Error(
            fmt::format("{} must be a finite number >= 0 (a factor on the error bound), got {}",
                        what, tolerance));
}

Comparison compare_outputs(const Computation &c, const Reference &want, const Buffers &got,
                           double tolerance) {
    check_tolerance(tolerance);
    Comparison r;
    r.checked = want.checked;
    r.total = want.total;
    for (const auto &o : want.outputs) {
        const Tensor &t = c.tensors[size_t(o.tensor)];
        const auto &g = got.data[size_t(o.tensor)];
        LT_CHECK(int64_t(g.size()) == t.num_elements(), "buffer sizes differ");
        for (size_t i = 0; i < o.value.size(); ++i) {
            const int64_t f = o.index.empty() ? int64_t(i) : o.index[i];
            const double w = o.value[i], e = o.bound[i], x = double(g[size_t(f)]);
            if (!(e < kInf)) {
                // No sound rule covers this element: it fails, never passes unchecked.
                ++r.unbounded;
                ++r.mismatches;
                if (r.ok)
                    r.first_mismatch = fmt::format(
                        "{}[{}]: got {}, want {:.9g}, but it cannot be checked: its float "
                        "evaluation has no error bound (a division by a value that may be zero, "
                        "a possible overflow, or an infinity or NaN reached through rounded "
                        "operands)",
                        t.name, coords(t, f), g[size_t(f)], w);
                r.ok = false;
                continue;
            }
            const double err = std::abs(x - w);
            bool match;
            if (std::isnan(w))
                match = std::isnan(x);
            else if (std::isinf(w))
                match = x == w;
            else
                match = std::isfinite(x) && err <= tolerance * e;
            const double ratio = std::isfinite(w) ? (err == 0 ? 0
                                                     : e > 0  ? err / e
                                                              : kInf)
                                                  : (match ? 0 : kInf);
            r.max_error_ratio = std::max(r.max_error_ratio, std::isnan(ratio) ? kInf : ratio);
            if (match) continue;
            ++r.mismatches;
            if (r.ok)
                r.first_mismatch = fmt::format(
                    "{}[{}]: got {}, want {:.9g} (error {:.3g}, {:.3g}x the bound {:.3g})", t.name,
                    coords(t, f), g[size_t(f)], w, err, ratio, e);
            r.ok = false;
        }
    }
    return r;
}
}  // namespace looptool
