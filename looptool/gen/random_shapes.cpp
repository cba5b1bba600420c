#include "looptool/gen/random_shapes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "looptool/ir/error.h"

namespace looptool {

const char *shape_family_name(ShapeFamily f) {
    switch (f) {
        case ShapeFamily::LogUniform: return "log-uniform";
        case ShapeFamily::Skinny: return "skinny";
        case ShapeFamily::Ragged: return "ragged";
        case ShapeFamily::Large: return "large";
    }
    return "?";
}

namespace {

constexpr int kFamilies = 4;

class Drawer {
public:
    explicit Drawer(uint64_t seed) : rng_(seed) {}

    /// Log-uniform integer in lo..hi (inclusive): uniform in log space, rounded down.
    int64_t log_uniform(int64_t lo, int64_t hi) {
        // Drawn from [log lo, log (hi + 1)) so that hi is as likely as its neighbours.
        std::uniform_real_distribution<double> d(std::log(double(lo)), std::log(double(hi) + 1));
        return std::clamp<int64_t>(int64_t(std::exp(d(rng_))), lo, hi);
    }

    MatmulShape draw(ShapeFamily f, int64_t l2_bytes) {
        switch (f) {
            case ShapeFamily::LogUniform:
                return {log_uniform(1, 4096), log_uniform(1, 4096), log_uniform(1, 4096)};
            case ShapeFamily::Skinny: {
                int64_t v[3] = {log_uniform(16, 4096), log_uniform(16, 4096),
                                log_uniform(16, 4096)};
                v[std::uniform_int_distribution<int>(0, 2)(rng_)] = log_uniform(1, 16);
                return {v[0], v[1], v[2]};
            }
            case ShapeFamily::Ragged: {
                auto ragged = [&] {
                    int64_t x = log_uniform(17, 1024);
                    return x % 8 == 0 ? x - 1 : x;  // 17..1023, never a multiple of 8
                };
                return {ragged(), ragged(), ragged()};
            }
            case ShapeFamily::Large: {
                MatmulShape s{log_uniform(256, 4096), log_uniform(256, 4096),
                              log_uniform(256, 4096)};
                return working_set(s) > l2_bytes ? s : MatmulShape{0, 0, 0};  // 0: draw again
            }
        }
        return {0, 0, 0};
    }

    static int64_t working_set(const MatmulShape &s) {
        return 4 * (s.m * s.k + s.k * s.n + s.m * s.n);
    }

private:
    std::mt19937_64 rng_;
};

}  // namespace

std::vector<RandomShape> random_matmul_shapes(const RandomShapeSpec &spec) {
    if (spec.count < 1 || spec.count > 100000)
        throw Error(fmt::format("random shapes: count {} is outside 1..100000", spec.count));
    if (spec.l2_bytes < 1024 || spec.l2_bytes > (int64_t(1) << 32))
        throw Error(
            fmt::format("random shapes: L2 size {} bytes is outside 1 KiB..4 GiB", spec.l2_bytes));
    double total = 0;
    for (double s : spec.share) {
        if (!(s >= 0)) throw Error("random shapes: a family's share is negative");
        total += s;
    }
    if (std::abs(total - 1) > 1e-6)
        throw Error(fmt::format("random shapes: the shares sum to {}, not 1", total));
    // The smallest shape of each family must fit the MAC bound, or it could never be drawn.
    const int64_t smallest[kFamilies] = {1, 16 * 16, 17 * 17 * 17, 256 * 256 * 256};
    for (int f = 0; f < kFamilies; ++f)
        if (spec.share[f] > 0 && smallest[f] > spec.max_macs)
            throw Error(
                fmt::format("random shapes: --max-macs {} is below the smallest {} shape ({} MACs)",
                            spec.max_macs, shape_family_name(ShapeFamily(f)), smallest[f]));
    if (spec.share[int(ShapeFamily::Large)] > 0 &&
        Drawer::working_set({4096, 4096, 4096}) <= spec.l2_bytes)
        throw Error(
            fmt::format("random shapes: no shape up to 4096^3 has a working set above {} bytes",
                        spec.l2_bytes));

    Drawer drawer(spec.seed);
    std::vector<RandomShape> out;
    std::set<std::string> names;
    int assigned = 0;
    for (int f = 0; f < kFamilies; ++f) {
        const int want = f == kFamilies - 1 ? spec.count - assigned
                                            : int(std::lround(spec.share[f] * spec.count));
        const int n = std::min(want, spec.count - assigned);
        assigned += n;
        // Rejection sampling; a budget of draws so that a request the bounds make (nearly)
        // impossible ends with an error, not a hang.
        int64_t budget = 1000 + 1000 * int64_t(n);
        for (int got = 0; got < n;) {
            if (--budget < 0)
                throw Error(
                    fmt::format("random shapes: could not draw {} distinct {} shapes within "
                                "--max-macs {} (got {}); ask for fewer",
                                n, shape_family_name(ShapeFamily(f)), spec.max_macs, got));
            MatmulShape s = drawer.draw(ShapeFamily(f), spec.l2_bytes);
            if (s.m == 0 || s.m * s.n * s.k > spec.max_macs) continue;
            const std::string name = s.name();
            if (spec.excluded.count(name) || !names.insert(name).second) continue;
            out.push_back({s, ShapeFamily(f)});
            ++got;
        }
    }
    std::sort(out.begin(), out.end(), [](const RandomShape &a, const RandomShape &b) {
        return a.shape.name() < b.shape.name();
    });
    return out;
}

}  // namespace looptool
