#include "looptool/check/schedule_check.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <set>

#include "looptool/actions/actions.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"

namespace looptool {

namespace {

int64_t odd_extent(std::mt19937_64 &rng) {
    static constexpr int64_t kExtents[] = {1, 2, 3, 5, 7, 16, 17, 37, 64, 100, 129};
    return kExtents[std::uniform_int_distribution<size_t>(0, std::size(kExtents) - 1)(rng)];
}

Computation random_computation(std::mt19937_64 &rng, int64_t max_volume) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    for (;;) {
        if (kind == 0) {
            // Small conv: odd spatial sizes and channel counts, 1..3 wide kernels.
            const int64_t ci = std::uniform_int_distribution<int64_t>(1, 5)(rng),
                          co = std::uniform_int_distribution<int64_t>(1, 7)(rng),
                          kh = std::uniform_int_distribution<int64_t>(1, 3)(rng),
                          kw = std::uniform_int_distribution<int64_t>(1, 3)(rng),
                          h = kh + std::uniform_int_distribution<int64_t>(0, 16)(rng),
                          w = kw + std::uniform_int_distribution<int64_t>(0, 16)(rng);
            return make_conv2d(1, ci, h, w, co, kh, kw);
        }
        if (kind == 1) return make_elementwise_add(odd_extent(rng), odd_extent(rng));
        const int64_t m = odd_extent(rng), n = odd_extent(rng), k = odd_extent(rng);
        if (m * n * k <= max_volume) return make_matmul(m, n, k);
    }
}

// A max, min or sum reduction (through a temporary or not, of a read or a product), a
// softmax or a layernorm.
Computation random_row_op(std::mt19937_64 &rng, int64_t max_volume) {
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    for (;;) {
        const int64_t m = odd_extent(rng), r = odd_extent(rng), n = odd_extent(rng);
        if (m * r * n > max_volume) continue;
        if (kind == 0) return make_softmax(m, r);
        if (kind == 1) return make_layernorm(m, r);
        const ReduceKind k = kind < 5   ? ReduceKind::Max
                             : kind < 8 ? ReduceKind::Min
                                        : ReduceKind::Sum;
        return make_reduce(k, m, r, n, std::bernoulli_distribution(0.5)(rng),
                           std::bernoulli_distribution(0.5)(rng));
    }
}

Computation draw_program(std::mt19937_64 &rng, const ScheduleCheckOptions &o) {
    if (o.programs == "contractions") return random_computation(rng, o.max_volume);
    if (o.programs == "reductions") return random_row_op(rng, o.max_volume);
    if (o.programs == "all")
        return std::bernoulli_distribution(0.5)(rng) ? random_computation(rng, o.max_volume)
                                                     : random_row_op(rng, o.max_volume);
    throw Error(
        fmt::format("unknown program set '{}' (known: contractions, reductions, all)", o.programs));
}

// The JIT kernel against the reference, on inputs from `seed` and NaN in every other tensor,
// so an element the kernel does not write, or a temporary it does not zero, is a mismatch.
Comparison verify_kernel(const Program &p, Jit &jit, uint64_t seed) {
    const Computation &c = *p.comp;
    Buffers got = make_buffers(c, seed);
    const Reference want = compute_reference(c, got);
    fill_non_inputs(c, got, std::numeric_limits<float>::quiet_NaN());
    const int32_t cancel = 0;
    jit.compile(p).fn(got.pointers().data(), &cancel);
    return compare_outputs(c, want, got);
}

}  // namespace

ScheduleCheckResult check_random_schedules(const ScheduleCheckOptions &o, Jit &jit) {
    const auto start = std::chrono::steady_clock::now();
    std::mt19937_64 rng(o.seed);
    const ActionSpace space = ActionSpace::preset(o.space);
    ScheduleCheckResult r;
    std::set<std::string> shapes;
    for (int i = 0; i < o.sequences; ++i, ++r.sequences) {
        auto comp = std::make_shared<Computation>(draw_program(rng, o));
        Program p = Program::naive(comp);
        std::string taken;
        const int len = std::uniform_int_distribution<int>(1, o.max_actions)(rng);
        const uint64_t data_seed = rng();
        auto fail = [&](const std::string &what) {
            if (int(r.failures.size()) < o.max_failures_kept)
                r.failures.push_back(
                    fmt::format("{} after [{}]: {}\n{}", comp->name, taken, what, dump(p)));
        };
        try {
            for (int s = 0; s < len; ++s) {
                std::vector<Action> legal;
                for (Action a : space.actions)
                    if (is_legal(p, a)) legal.push_back(a);
                if (legal.empty()) break;
                const Action a =
                    legal[std::uniform_int_distribution<size_t>(0, legal.size() - 1)(rng)];
                p = apply(p, a);
                taken += fmt::format("{}{}", taken.empty() ? "" : ",", action_name(a));
                ++r.actions;
            }
            if (i < o.start) continue;
            shapes.insert(comp->name);
            if (o.progress) {
                std::fputs(fmt::format("sequence {}: {} [{}]\n", i, comp->name, taken).c_str(),
                           stderr);
                std::fflush(stderr);
            }
            if (Comparison c = verify_schedule(p, data_seed); !c.ok) {
                ++r.interpreter_mismatches;
                fail("interpreter: " + c.first_mismatch);
            }
            if (Comparison c = verify_kernel(p, jit, data_seed); !c.ok) {
                ++r.jit_mismatches;
                fail("JIT kernel: " + c.first_mismatch);
            }
        } catch (const std::exception &e) {  // Error or InternalError: both are findings here
            ++r.errors;
            fail(std::string("error: ") + e.what());
        }
    }
    r.sequences -= std::min(o.start, o.sequences);
    r.distinct_shapes = int(shapes.size());
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
}

}  // namespace looptool
