#include "baselines/onednn_rowop.h"

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "baselines/onednn_api.h"
#include "baselines/reference_kernels.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/ir/error.h"
#include "looptool/ir/row_ops.h"
#include "looptool/measure/measure.h"

namespace looptune::bench {

void streaming_copy(const float *x, float *y, int64_t n);

using looptool::Computation;
using looptool::Error;

namespace {

const OnednnApi &api() { return onednn_api(); }

void check(dnnl_status_t s, const char *what) { onednn_check(s, what); }

// One primitive over a rows x cols row-major X and Y (the layernorm's G and B: scale, shift).
struct RowPrimitive {
    dnnl_engine_t engine = nullptr;
    dnnl_stream_t stream = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    dnnl_primitive_t prim = nullptr;
    dnnl_memory_desc_t data{}, vec{};
    std::vector<dnnl_memory_t> mems;
    std::vector<dnnl_exec_arg_t> args;

    RowPrimitive(bool softmax, int64_t rows, int64_t cols) {
        const OnednnApi &a = api();
        onednn_set_threads();
        check(a.dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
        check(a.dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream");
        const dnnl_dims_t dd = {rows, cols}, vd = {cols};
        check(a.dnnl_memory_desc_init_by_tag(&data, 2, dd, dnnl_f32, dnnl_ab), "data desc");
        check(a.dnnl_memory_desc_init_by_tag(&vec, 1, vd, dnnl_f32, dnnl_a), "scale desc");
        if (softmax) {
            dnnl_softmax_desc_t d;
            check(a.dnnl_softmax_forward_desc_init(&d, dnnl_forward_inference, &data, 1),
                  "softmax descriptor");
            check(a.dnnl_primitive_desc_create(&pd, &d, nullptr, engine, nullptr),
                  "softmax primitive descriptor");
        } else {
            // The statistics are computed (no global stats) and not returned (inference).
            dnnl_layer_normalization_desc_t d;
            check(a.dnnl_layer_normalization_forward_desc_init(
                      &d, dnnl_forward_inference, &data, nullptr, 1e-5f,
                      unsigned(dnnl_use_scale) | unsigned(dnnl_use_shift)),
                  "layer normalization descriptor");
            check(a.dnnl_primitive_desc_create(&pd, &d, nullptr, engine, nullptr),
                  "layer normalization primitive descriptor");
        }
        check(a.dnnl_primitive_create(&prim, pd), "primitive");
    }
    ~RowPrimitive() {
        const OnednnApi &a = api();
        for (dnnl_memory_t m : mems) a.dnnl_memory_destroy(m);
        if (prim) a.dnnl_primitive_destroy(prim);
        if (pd) a.dnnl_primitive_desc_destroy(pd);
        if (stream) a.dnnl_stream_destroy(stream);
        if (engine) a.dnnl_engine_destroy(engine);
    }
    void bind(int arg, const dnnl_memory_desc_t &md, float *p) {
        dnnl_memory_t m = nullptr;
        check(api().dnnl_memory_create(&m, &md, engine, p), "memory");
        mems.push_back(m);
        args.push_back({arg, m});
    }
    void run() {
        const OnednnApi &a = api();
        onednn_set_threads();  // OpenMP's thread count is per calling thread
        if (a.dnnl_primitive_execute(prim, stream, int(args.size()), args.data()) != dnnl_success)
            std::abort();
        a.dnnl_stream_wait(stream);
    }
    std::string implementation() const {
        const char *name = nullptr;
        check(api().dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name),
              "implementation query");
        return name ? name : "?";
    }
};

// What the KernelFn below runs: a primitive, or the copy of n floats.
RowPrimitive *g_prim = nullptr;
int64_t g_copy_floats = 0;
size_t g_copy_to = 0;  // the output's buffer index; X is buffer 0

void rowop_kernel(float *const *b, const volatile int32_t *) {
    if (g_prim)
        g_prim->run();
    else
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

struct RowState {
    Computation comp;
    looptool::Buffers buffers;
    std::unique_ptr<RowPrimitive> prim;  // null: the copy
};

// Binds the primitive to our buffers: X, Y, and the layernorm's G and B.
std::unique_ptr<RowPrimitive> make_primitive(const std::string &method, RowState &st) {
    const bool softmax = method == kOnednnSoftmax;
    auto prim = std::make_unique<RowPrimitive>(softmax, rows_of(st.comp), cols_of(st.comp));
    std::vector<float *> p = st.buffers.pointers();
    prim->bind(DNNL_ARG_SRC, prim->data, p[0]);
    prim->bind(DNNL_ARG_DST, prim->data, p.back());
    if (!softmax) {
        prim->bind(DNNL_ARG_SCALE, prim->vec, p[1]);
        prim->bind(DNNL_ARG_SHIFT, prim->vec, p[2]);
    }
    return prim;
}

// Points the kernel's globals at st.
void activate(RowState &st) {
    g_prim = st.prim.get();
    g_copy_floats = rows_of(st.comp) * cols_of(st.comp);
    g_copy_to = st.buffers.data.size() - 1;
}

void run_once(RowState &st) {
    activate(st);
    std::vector<float *> p = st.buffers.pointers();
    int32_t cancel = 0;
    rowop_kernel(p.data(), &cancel);
}

}  // namespace

std::function<double()> rowop_measurer(const std::string &bench, const std::string &method,
                                       const Computation &c) {
    if (!rowop_method_runs_on(method, c))
        throw Error(fmt::format("{}: {} runs only on {}", c.name, method,
                                method == kStreamingCopy ? "softmax, layernorm and GELU benchmarks"
                                                         : "its own op (make_softmax/layernorm)"));
    auto st = std::make_shared<RowState>(RowState{c, looptool::make_buffers(c, 1), nullptr});
    const looptool::Reference want = looptool::compute_reference(c, st->buffers);
    if (method != kStreamingCopy) st->prim = make_primitive(method, *st);
    run_once(*st);
    if (method == kStreamingCopy) {
        if (st->buffers.data.back() != st->buffers.data.front())
            throw Error(fmt::format("{} copy: Y is not a copy of X", bench));
    } else if (const auto cmp = looptool::compare_outputs(c, want, st->buffers); !cmp.ok) {
        throw Error(fmt::format("{} {} ({}): the library's result differs from the reference: {}",
                                bench, method, st->prim->implementation(), cmp.first_mismatch));
    }
    return [st] {
        struct Active {  // the kernel's globals, cleared however the measurement ends
            explicit Active(RowState &s) { activate(s); }
            ~Active() { g_prim = nullptr; }
        } active(*st);
        return looptool::measure_kernel_uncut(rowop_kernel, st->comp, st->buffers).median_gflops;
    };
}

double streaming_copy_seconds(int64_t floats) {
    Computation c = looptool::make_softmax(1, floats, "copy");
    auto measure = rowop_measurer("copy", kStreamingCopy, c);
    return c.flops() / (measure() * 1e9);
}

std::string rowop_implementation(const std::string &method, const Computation &c) {
    if (method == kStreamingCopy) return "loop -O3 -march=native";
    RowPrimitive p(method == kOnednnSoftmax, rows_of(c), cols_of(c));
    return p.implementation();
}

}  // namespace looptune::bench
