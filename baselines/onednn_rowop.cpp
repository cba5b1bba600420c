#include "baselines/onednn_rowop.h"

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "baselines/onednn_primitive.h"
#include "looptool/check/interpreter.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"
#include "looptool/measure/measure.h"

namespace looptune::bench {

using looptool::Computation;
using looptool::Error;

namespace {

// What the KernelFn below runs: the copy of n floats from X (buffer 0) to the output.
int64_t g_copy_floats = 0;
size_t g_copy_to = 0;

void copy_kernel(float *const *b, const volatile int32_t *) {
    streaming_copy(b[0], b[g_copy_to], g_copy_floats);
}

int64_t rows_of(const Computation &c) { return c.vars[0].extent; }
int64_t cols_of(const Computation &c) { return c.vars[1].extent; }

}  // namespace

bool is_softmax(const Computation &c) {
    return c.vars.size() == 2 && c == looptool::make_softmax(rows_of(c), cols_of(c), c.name);
}

bool is_layernorm(const Computation &c) {
    return c.vars.size() == 2 && c == looptool::make_layernorm(rows_of(c), cols_of(c), c.name);
}

bool is_rowop_method(const std::string &m) {
    return m == kOnednnSoftmax || m == kOnednnLayernorm || m == kStreamingCopy;
}

bool rowop_method_runs_on(const std::string &m, const Computation &c) {
    if (m == kOnednnSoftmax) return is_softmax(c);
    if (m == kOnednnLayernorm) return is_layernorm(c);
    if (m != kStreamingCopy || c.vars.size() != 2) return false;
    const bool gelu = c == looptool::make_gelu(rows_of(c), cols_of(c), false, c.name) ||
                      c == looptool::make_gelu(rows_of(c), cols_of(c), true, c.name);
    return gelu || is_softmax(c) || is_layernorm(c);
}

double rowop_min_bytes(const Computation &c) {
    const double xy = 2.0 * 4 * double(rows_of(c)) * double(cols_of(c));
    return xy + (is_layernorm(c) ? 2.0 * 4 * double(cols_of(c)) : 0);
}

namespace {

// The primitive of `method` on c, and the buffers it takes: X, (the layernorm's G and B), Y.
std::unique_ptr<OnednnPrimitive> row_primitive(const std::string &method, const Computation &c,
                                               std::vector<int> *buffers) {
    const int y = int(c.num_buffers()) - 1;
    if (method == kOnednnSoftmax) {
        if (buffers) *buffers = {0, y};
        return onednn_softmax(rows_of(c), cols_of(c));
    }
    if (buffers) *buffers = {0, 1, 2, y};
    return onednn_layernorm(rows_of(c), cols_of(c));
}

// The copy, checked to copy, measured like a kernel.
std::function<double()> copy_measurer(const std::string &bench, const Computation &c) {
    struct CopyState {
        Computation comp;
        looptool::Buffers buffers;
    };
    auto st = std::make_shared<CopyState>(CopyState{c, looptool::make_buffers(c, 1)});
    auto activate = [](CopyState &s) {
        g_copy_floats = rows_of(s.comp) * cols_of(s.comp);
        g_copy_to = s.buffers.data.size() - 1;
    };
    activate(*st);
    std::vector<float *> p = st->buffers.pointers();
    int32_t cancel = 0;
    copy_kernel(p.data(), &cancel);
    if (st->buffers.data.back() != st->buffers.data.front())
        throw Error(fmt::format("{} copy: Y is not a copy of X", bench));
    return [st, activate] {
        activate(*st);
        return looptool::measure_kernel_uncut(copy_kernel, st->comp, st->buffers).median_gflops;
    };
}

}  // namespace

std::function<double()> rowop_measurer(const std::string &bench, const std::string &method,
                                       const Computation &c) {
    if (!rowop_method_runs_on(method, c))
        throw Error(fmt::format("{}: {} runs only on {}", c.name, method,
                                method == kStreamingCopy ? "softmax, layernorm and GELU benchmarks"
                                                         : "its own op (make_softmax/layernorm)"));
    if (method == kStreamingCopy) return copy_measurer(bench, c);
    std::vector<int> buffers;
    auto prim = row_primitive(method, c, &buffers);
    return primitive_measurer(bench, method, c, std::move(prim), buffers);
}

double streaming_copy_seconds(int64_t floats) {
    Computation c = looptool::make_softmax(1, floats, "copy");
    auto measure = rowop_measurer("copy", kStreamingCopy, c);
    return c.flops() / (measure() * 1e9);
}

std::string rowop_implementation(const std::string &method, const Computation &c) {
    if (method == kStreamingCopy) return "loop -O3 -march=native, non-temporal past LLC/2";
    return row_primitive(method, c, nullptr)->implementation();
}

}  // namespace looptune::bench
