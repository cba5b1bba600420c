#include "baselines/onednn_conv.h"

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <numeric>

#include "baselines/onednn_api.h"
#include "baselines/reference_kernels.h"
#include "looptool/check/verify.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"

namespace looptune::bench {

using looptool::Error;

namespace {

const OnednnApi &api() { return onednn_api(); }

void check(dnnl_status_t s, const char *what) { onednn_check(s, what); }

// oneDNN's name for a blocked layout (nChw16c, OIhw16i16o): outer dims by decreasing stride,
// upper case when also blocked, then the inner blocks.
std::string layout_name(const dnnl_memory_desc_t &md, const char *letters) {
    if (md.format_kind != dnnl_blocked) return "non-blocked";
    const auto &b = md.format_desc.blocking;
    std::array<int, DNNL_MAX_NDIMS> order{};
    std::iota(order.begin(), order.begin() + md.ndims, 0);
    std::stable_sort(order.begin(), order.begin() + md.ndims,
                     [&](int x, int y) { return b.strides[x] > b.strides[y]; });
    std::string s;
    for (int i = 0; i < md.ndims; ++i) {
        const int d = order[size_t(i)];
        const bool blocked = std::find(b.inner_idxs, b.inner_idxs + b.inner_nblks, d) !=
                             b.inner_idxs + b.inner_nblks;
        s += blocked ? char(letters[d] - 'a' + 'A') : letters[d];
    }
    for (int i = 0; i < b.inner_nblks; ++i)
        s += fmt::format("{}{}", b.inner_blks[i], letters[b.inner_idxs[i]]);
    return s;
}

OnednnConv *g_active = nullptr;

}  // namespace

const char *conv_method_name(ConvLayout layout) {
    switch (layout) {
        case ConvLayout::Plain: return "onednn-conv-plain";
        case ConvLayout::Best: return "onednn-conv-best";
    }
    return "?";
}

bool is_conv2d(const looptool::Computation &c) { return looptool::conv_params(c).has_value(); }

struct OnednnConv::Impl {
    ConvLayout layout;
    dnnl_engine_t engine = nullptr;
    dnnl_stream_t stream = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    dnnl_primitive_t conv = nullptr;
    // The memory objects the convolution reads and writes, and (Plain) our tensors' descs.
    dnnl_memory_desc_t user_md[3]{};  // X, W, Y in our layouts
    dnnl_memory_t mem[3]{};           // src, weights, dst as the convolution sees them
    dnnl_memory_t user_y = nullptr;   // Best: our Y, the target of the final reorder
    int tensor[3] = {0, 1, 3};        // X, W and Y among the computation's buffers
    bool bound = false;

    ~Impl() {
        const OnednnApi &a = api();
        for (dnnl_memory_t m : mem)
            if (m) a.dnnl_memory_destroy(m);
        if (user_y) a.dnnl_memory_destroy(user_y);
        if (conv) a.dnnl_primitive_destroy(conv);
        if (pd) a.dnnl_primitive_desc_destroy(pd);
        if (stream) a.dnnl_stream_destroy(stream);
        if (engine) a.dnnl_engine_destroy(engine);
    }

    const dnnl_memory_desc_t &conv_md(int i) const {
        static const dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_weights_md,
                                          dnnl_query_dst_md};
        return *api().dnnl_primitive_desc_query_md(pd, q[i], 0);
    }

    // One reorder from `from` to `to`, run now (outside any timing).
    void reorder(dnnl_memory_t from, const dnnl_memory_desc_t &from_md, dnnl_memory_t to,
                 const dnnl_memory_desc_t &to_md) {
        const OnednnApi &a = api();
        dnnl_primitive_desc_t rpd = nullptr;
        check(a.dnnl_reorder_primitive_desc_create(&rpd, &from_md, engine, &to_md, engine, nullptr),
              "reorder descriptor");
        dnnl_primitive_t r = nullptr;
        const dnnl_status_t made = a.dnnl_primitive_create(&r, rpd);
        a.dnnl_primitive_desc_destroy(rpd);
        check(made, "reorder primitive");
        const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        const dnnl_status_t ran = a.dnnl_primitive_execute(r, stream, 2, args);
        a.dnnl_stream_wait(stream);
        a.dnnl_primitive_destroy(r);
        check(ran, "reorder");
    }
};

OnednnConv::OnednnConv(const looptool::Computation &c, ConvLayout layout)
    : impl_(std::make_unique<Impl>()) {
    const auto conv = looptool::conv_params(c);
    if (!conv)
        throw Error(
            fmt::format("{}: {} runs only conv2d benchmarks (one stride and one padding "
                        "for rows and columns)",
                        c.name, conv_method_name(layout)));
    const OnednnApi &a = api();
    onednn_set_threads();
    Impl &m = *impl_;
    m.layout = layout;
    check(a.dnnl_engine_create(&m.engine, dnnl_cpu, 0), "engine");
    check(a.dnnl_stream_create(&m.stream, m.engine, dnnl_stream_default_flags), "stream");
    const looptool::ConvRoles &r = conv->roles;
    m.tensor[0] = r.pad_stmt >= 0 ? r.input : r.x;
    m.tensor[1] = r.w;
    m.tensor[2] = r.out;
    const auto &x = c.tensors[size_t(m.tensor[0])].shape, &w = c.tensors[size_t(r.w)].shape,
               &y = c.tensors[size_t(r.out)].shape;
    const dnnl_dims_t xd = {x[0], x[1], x[2], x[3]}, wd = {w[0], w[1], w[2], w[3]},
                      yd = {y[0], y[1], y[2], y[3]};
    check(a.dnnl_memory_desc_init_by_tag(&m.user_md[0], 4, xd, dnnl_f32, dnnl_nchw), "src desc");
    check(a.dnnl_memory_desc_init_by_tag(&m.user_md[1], 4, wd, dnnl_f32, dnnl_oihw), "wei desc");
    check(a.dnnl_memory_desc_init_by_tag(&m.user_md[2], 4, yd, dnnl_f32, dnnl_nchw), "dst desc");
    dnnl_memory_desc_t conv_md[3];
    for (int i = 0; i < 3; ++i) {
        conv_md[i] = m.user_md[i];
        if (layout == ConvLayout::Best)
            check(a.dnnl_memory_desc_init_by_tag(&conv_md[i], 4,
                                                 i == 0   ? xd
                                                 : i == 1 ? wd
                                                          : yd,
                                                 dnnl_f32, dnnl_format_tag_any),
                  "any desc");
    }
    const dnnl_dims_t strides = {conv->stride, conv->stride}, padding = {conv->pad, conv->pad};
    dnnl_convolution_desc_t desc;
    check(a.dnnl_convolution_forward_desc_init(&desc, dnnl_forward_inference,
                                               dnnl_convolution_direct, &conv_md[0], &conv_md[1],
                                               nullptr, &conv_md[2], strides, padding, padding),
          "convolution descriptor");
    check(a.dnnl_primitive_desc_create(&m.pd, &desc, nullptr, m.engine, nullptr),
          "convolution primitive descriptor");
    check(a.dnnl_primitive_create(&m.conv, m.pd), "convolution primitive");
}

OnednnConv::~OnednnConv() = default;

void OnednnConv::bind(looptool::Buffers &b) {
    const OnednnApi &a = api();
    Impl &m = *impl_;
    onednn_set_threads();
    LT_CHECK(!m.bound, "OnednnConv::bind called twice");
    std::vector<float *> p = b.pointers();
    LT_CHECK(p.size() == b.data.size() && int(p.size()) > m.tensor[2], "conv2d buffers");
    float *user[3] = {p[size_t(m.tensor[0])], p[size_t(m.tensor[1])], p[size_t(m.tensor[2])]};
    if (m.layout == ConvLayout::Plain) {
        for (int i = 0; i < 3; ++i)
            check(a.dnnl_memory_create(&m.mem[i], &m.user_md[i], m.engine, user[i]), "memory");
    } else {
        for (int i = 0; i < 3; ++i)
            check(a.dnnl_memory_create(&m.mem[i], &m.conv_md(i), m.engine, DNNL_MEMORY_ALLOCATE),
                  "memory");
        for (int i = 0; i < 2; ++i) {
            dnnl_memory_t from = nullptr;
            check(a.dnnl_memory_create(&from, &m.user_md[i], m.engine, user[i]), "memory");
            m.reorder(from, m.user_md[i], m.mem[i], m.conv_md(i));
            a.dnnl_memory_destroy(from);
        }
        check(a.dnnl_memory_create(&m.user_y, &m.user_md[2], m.engine, user[2]), "memory");
    }
    m.bound = true;
}

void OnednnConv::run() {
    const OnednnApi &a = api();
    Impl &m = *impl_;
    // OpenMP's thread count is per calling thread (onednn.cpp); nanoseconds against the call.
    onednn_set_threads();
    const dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, m.mem[0]}, {DNNL_ARG_WEIGHTS, m.mem[1]}, {DNNL_ARG_DST, m.mem[2]}};
    if (a.dnnl_primitive_execute(m.conv, m.stream, 3, args) != dnnl_success) std::abort();
    a.dnnl_stream_wait(m.stream);
}

void OnednnConv::finish() {
    Impl &m = *impl_;
    if (m.layout == ConvLayout::Best) m.reorder(m.mem[2], m.conv_md(2), m.user_y, m.user_md[2]);
}

std::string OnednnConv::implementation() const {
    const char *name = nullptr;
    check(api().dnnl_primitive_desc_query(impl_->pd, dnnl_query_impl_info_str, 0, &name),
          "implementation query");
    return name ? name : "?";
}

std::string OnednnConv::layouts() const {
    return fmt::format("{} {} {}", layout_name(impl_->conv_md(0), "nchw"),
                       layout_name(impl_->conv_md(1), "oihw"),
                       layout_name(impl_->conv_md(2), "nchw"));
}

void set_active_conv(OnednnConv *active) { g_active = active; }

void onednn_conv_kernel(float *const *, const volatile int32_t *) {
    if (!g_active) std::abort();  // a bug of ours: no convolution bound
    g_active->run();
}

std::function<double()> onednn_conv_measurer(const std::string &bench, ConvLayout layout,
                                             const looptool::Computation &c) {
    // The convolution, its buffers and the computation live as long as the function.
    struct State {
        State(const looptool::Computation &c, ConvLayout layout)
            : comp(c), conv(comp, layout), buffers(looptool::make_buffers(comp, 1)) {}
        looptool::Computation comp;
        OnednnConv conv;
        looptool::Buffers buffers;
    };
    auto st = std::make_shared<State>(c, layout);
    const looptool::Reference want = looptool::compute_reference(c, st->buffers);
    st->conv.bind(st->buffers);
    st->conv.run();
    st->conv.finish();
    const looptool::Comparison cmp = looptool::compare_outputs(c, want, st->buffers);
    if (!cmp.ok)
        throw Error(fmt::format("{} {} ({}): the library's result differs from the reference: {}",
                                bench, conv_method_name(layout), st->conv.implementation(),
                                cmp.first_mismatch));
    return [st] {
        struct Active {  // the kernel's global, cleared however the measurement ends
            explicit Active(OnednnConv *c) { set_active_conv(c); }
            ~Active() { set_active_conv(nullptr); }
        } active(&st->conv);
        return looptool::measure_kernel_uncut(onednn_conv_kernel, st->comp, st->buffers)
            .median_gflops;
    };
}

}  // namespace looptune::bench
