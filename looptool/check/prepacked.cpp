#include "looptool/check/prepacked.h"

#include <limits>

#include "looptool/ir/error.h"

namespace looptool {

void add_packed_buffers(const Prepacked &s, Buffers &b) {
    const Computation &run = *s.run.comp;
    LT_CHECK(b.data.size() + s.packed.size() == run.num_buffers(),
             "buffers do not match the prepacked computation");
    for (size_t t = b.data.size(); t < run.num_buffers(); ++t)
        b.data.emplace_back(size_t(run.tensors[t].num_elements()), 0.0f);
}

void drop_packed_buffers(const Prepacked &s, Buffers &b) {
    LT_CHECK(b.data.size() == s.run.comp->num_buffers(), "buffers hold no packed tensors");
    b.data.resize(b.data.size() - s.packed.size());
}

void run_prepacked_schedule(const Prepacked &s, Buffers &b) {
    run_schedule(s.prepare, b);
    run_schedule(s.run, b);
}

KernelFn run_prepacked_kernels(Jit &jit, const Prepacked &s, Buffers &b) {
    LT_CHECK(b.data.size() == s.run.comp->num_buffers(), "buffers hold no packed tensors");
    std::vector<float *> ptrs = b.pointers();
    const int32_t cancel = 0;
    jit.compile(s.prepare).fn(ptrs.data(), &cancel);
    const KernelFn run = jit.compile(s.run).fn;
    run(ptrs.data(), &cancel);
    return run;
}

Comparison verify_prepacked_schedule(const Program &p, const Prepacked &s, uint64_t seed,
                                     double tolerance) {
    check_tolerance(tolerance);
    Buffers got = make_buffers(*p.comp, seed);
    const Reference want = compute_reference(*p.comp, got);
    fill_non_inputs(*p.comp, got, std::numeric_limits<float>::quiet_NaN());
    add_packed_buffers(s, got);
    run_prepacked_schedule(s, got);
    drop_packed_buffers(s, got);
    return compare_outputs(*p.comp, want, got, tolerance);
}

}  // namespace looptool
