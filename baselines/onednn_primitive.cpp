#include "baselines/onednn_primitive.h"

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>

#include "baselines/onednn_api.h"
#include "baselines/reference_kernels.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"

namespace looptune::bench {

using looptool::Computation;
using looptool::Error;

namespace {

const OnednnApi &api() { return onednn_api(); }

void check(dnnl_status_t s, const char *what) { onednn_check(s, what); }

dnnl_memory_desc_t plain(std::vector<int64_t> dims) {
    dnnl_dims_t d{};
    for (size_t i = 0; i < dims.size(); ++i) d[i] = dims[i];
    dnnl_memory_desc_t md;
    const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd};
    check(api().dnnl_memory_desc_init_by_tag(&md, int(dims.size()), d, dnnl_f32,
                                             tags[dims.size() - 1]),
          "memory descriptor");
    return md;
}

dnnl_memory_desc_t strided(const std::vector<int64_t> &dims, const std::vector<int64_t> &strides) {
    dnnl_dims_t d{}, s{};
    for (size_t i = 0; i < dims.size(); ++i) {
        d[i] = dims[i];
        s[i] = strides[i];
    }
    dnnl_memory_desc_t md;
    check(api().dnnl_memory_desc_init_by_strides(&md, int(dims.size()), d, dnnl_f32, s),
          "strided memory descriptor");
    return md;
}

}  // namespace

struct OnednnPrimitive::Impl {
    dnnl_engine_t engine = nullptr;
    dnnl_stream_t stream = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    dnnl_primitive_t prim = nullptr;
    std::vector<std::pair<int, dnnl_memory_desc_t>> slots;  // (argument, descriptor)
    std::vector<dnnl_memory_t> mems;
    std::vector<dnnl_exec_arg_t> args;

    Impl() {
        api();  // loads oneDNN, which onednn_set_threads needs
        onednn_set_threads();
        check(api().dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
        check(api().dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream");
    }
    // The primitive of the operation descriptor `desc` (with `attr`'s post-ops, if any).
    void create(const void *desc, const char *what, const_dnnl_primitive_attr_t attr = nullptr) {
        check(api().dnnl_primitive_desc_create(&pd, desc, attr, engine, nullptr), what);
        check(api().dnnl_primitive_create(&prim, pd), what);
    }
    void release_memories() {
        for (dnnl_memory_t m : mems) api().dnnl_memory_destroy(m);
        mems.clear();
        args.clear();
    }
    ~Impl() {
        release_memories();
        if (prim) api().dnnl_primitive_destroy(prim);
        if (pd) api().dnnl_primitive_desc_destroy(pd);
        if (stream) api().dnnl_stream_destroy(stream);
        if (engine) api().dnnl_engine_destroy(engine);
    }
};

OnednnPrimitive::OnednnPrimitive(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnPrimitive::~OnednnPrimitive() = default;

void OnednnPrimitive::bind(const std::vector<float *> &buffers) {
    if (buffers.size() != impl_->slots.size())
        throw Error(fmt::format("oneDNN primitive: {} buffers given, {} expected", buffers.size(),
                                impl_->slots.size()));
    impl_->release_memories();
    for (size_t i = 0; i < buffers.size(); ++i) {
        dnnl_memory_t m = nullptr;
        check(api().dnnl_memory_create(&m, &impl_->slots[i].second, impl_->engine, buffers[i]),
              "memory");
        impl_->mems.push_back(m);
        impl_->args.push_back({impl_->slots[i].first, m});
    }
}

void OnednnPrimitive::run() {
    onednn_set_threads();  // OpenMP's thread count is per calling thread
    if (api().dnnl_primitive_execute(impl_->prim, impl_->stream, int(impl_->args.size()),
                                     impl_->args.data()) != dnnl_success)
        std::abort();  // bound and created above: only a bug of ours fails here
    api().dnnl_stream_wait(impl_->stream);
}

std::string OnednnPrimitive::implementation() const {
    const char *name = nullptr;
    check(api().dnnl_primitive_desc_query(impl_->pd, dnnl_query_impl_info_str, 0, &name),
          "implementation query");
    return name ? name : "?";
}

std::unique_ptr<OnednnPrimitive> onednn_matmul(const StridedMatmul &m, bool bias) {
    auto p = std::make_unique<OnednnPrimitive::Impl>();
    const dnnl_memory_desc_t src = strided(m.src_dims, m.src_strides),
                             wei = strided(m.wei_dims, m.wei_strides),
                             dst = strided(m.dst_dims, m.dst_strides);
    std::vector<int64_t> bias_dims(m.dst_dims.size(), 1);
    bias_dims.back() = m.dst_dims.back();
    const dnnl_memory_desc_t b = plain(bias_dims);
    dnnl_matmul_desc_t d;
    check(api().dnnl_matmul_desc_init(&d, &src, &wei, bias ? &b : nullptr, &dst),
          "matmul descriptor");
    p->create(&d, "matmul primitive");
    p->slots = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}};
    if (bias) p->slots.push_back({DNNL_ARG_BIAS, b});
    p->slots.push_back({DNNL_ARG_DST, dst});
    return std::make_unique<OnednnPrimitive>(std::move(p));
}

std::unique_ptr<OnednnPrimitive> onednn_add(int64_t rows, int64_t cols) {
    auto p = std::make_unique<OnednnPrimitive::Impl>();
    const dnnl_memory_desc_t md = plain({rows, cols});
    dnnl_binary_desc_t d;
    check(api().dnnl_binary_desc_init(&d, dnnl_binary_add, &md, &md, &md), "binary descriptor");
    p->create(&d, "binary add primitive");
    p->slots = {{DNNL_ARG_SRC_0, md}, {DNNL_ARG_SRC_1, md}, {DNNL_ARG_DST, md}};
    return std::make_unique<OnednnPrimitive>(std::move(p));
}

std::unique_ptr<OnednnPrimitive> onednn_gelu(int64_t rows, int64_t cols) {
    auto p = std::make_unique<OnednnPrimitive::Impl>();
    const dnnl_memory_desc_t md = plain({rows, cols});
    dnnl_eltwise_desc_t d;
    check(api().dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, dnnl_eltwise_gelu_erf,
                                               &md, 0.f, 0.f),
          "eltwise descriptor");
    p->create(&d, "GELU primitive");
    p->slots = {{DNNL_ARG_SRC, md}, {DNNL_ARG_DST, md}};
    return std::make_unique<OnednnPrimitive>(std::move(p));
}

std::unique_ptr<OnednnPrimitive> onednn_softmax(int64_t rows, int64_t cols) {
    auto p = std::make_unique<OnednnPrimitive::Impl>();
    const dnnl_memory_desc_t md = plain({rows, cols});
    dnnl_softmax_desc_t d;
    check(api().dnnl_softmax_forward_desc_init(&d, dnnl_forward_inference, &md, 1),
          "softmax descriptor");
    p->create(&d, "softmax primitive");
    p->slots = {{DNNL_ARG_SRC, md}, {DNNL_ARG_DST, md}};
    return std::make_unique<OnednnPrimitive>(std::move(p));
}

std::unique_ptr<OnednnPrimitive> onednn_layernorm(int64_t rows, int64_t cols) {
    auto p = std::make_unique<OnednnPrimitive::Impl>();
    const dnnl_memory_desc_t md = plain({rows, cols}), vec = plain({cols});
    dnnl_layer_normalization_desc_t d;
    check(api().dnnl_layer_normalization_forward_desc_init(
              &d, dnnl_forward_inference, &md, nullptr, 1e-5f,
              unsigned(dnnl_use_scale) | unsigned(dnnl_use_shift)),
          "layer normalization descriptor");
    p->create(&d, "layer normalization primitive");
    p->slots = {
        {DNNL_ARG_SRC, md}, {DNNL_ARG_SCALE, vec}, {DNNL_ARG_SHIFT, vec}, {DNNL_ARG_DST, md}};
    return std::make_unique<OnednnPrimitive>(std::move(p));
}

namespace {

dnnl_alg_kind_t eltwise_of(looptool::Activation a) {
    switch (a) {
        case looptool::Activation::None: return dnnl_alg_kind_undef;
        case looptool::Activation::Relu: return dnnl_eltwise_relu;
        case looptool::Activation::Gelu: return dnnl_eltwise_gelu_erf;
        case looptool::Activation::GeluTanh: return dnnl_eltwise_gelu_tanh;
    }
    return dnnl_alg_kind_undef;
}

}  // namespace

std::unique_ptr<OnednnPrimitive> onednn_matmul_epilogue(const looptool::MatmulEpilogue &e) {
    auto p = std::make_unique<OnednnPrimitive::Impl>();
    const dnnl_memory_desc_t a = plain({e.m, e.k}), b = plain({e.k, e.n}), c = plain({e.m, e.n}),
                             bias = plain({1, e.n});
    dnnl_matmul_desc_t d;
    check(api().dnnl_matmul_desc_init(&d, &a, &b, e.epilogue.bias ? &bias : nullptr, &c),
          "matmul descriptor");
    dnnl_post_ops_t po = nullptr;
    dnnl_primitive_attr_t attr = nullptr;
    check(api().dnnl_post_ops_create(&po), "post-ops");
    const bool act = e.epilogue.act != looptool::Activation::None;
    dnnl_status_t s =
        act ? api().dnnl_post_ops_append_eltwise(po, 1.0f, eltwise_of(e.epilogue.act), 0, 0)
            : dnnl_success;
    if (s == dnnl_success && e.epilogue.residual)
        s = api().dnnl_post_ops_append_binary(po, dnnl_binary_add, &c);
    if (s == dnnl_success) s = api().dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success) s = api().dnnl_primitive_attr_set_post_ops(attr, po);
    if (s == dnnl_success) {
        try {
            p->create(&d, "matmul primitive with post-ops", attr);
        } catch (...) {
            api().dnnl_primitive_attr_destroy(attr);
            api().dnnl_post_ops_destroy(po);
            throw;
        }
    }
    if (attr) api().dnnl_primitive_attr_destroy(attr);
    api().dnnl_post_ops_destroy(po);
    check(s, "post-ops");
    p->slots = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}};
    if (e.epilogue.bias) p->slots.push_back({DNNL_ARG_BIAS, bias});
    if (e.epilogue.residual)
        p->slots.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(act ? 1 : 0) | DNNL_ARG_SRC_1, c});
    p->slots.push_back({DNNL_ARG_DST, c});
    return std::make_unique<OnednnPrimitive>(std::move(p));
}

namespace {

OnednnPrimitive *g_primitive = nullptr;  // what primitive_kernel runs

void primitive_kernel(float *const *, const volatile int32_t *) { g_primitive->run(); }

struct PrimitiveState {
    Computation comp;
    looptool::Buffers buffers;
    std::unique_ptr<OnednnPrimitive> prim;
};

}  // namespace

std::function<double()> primitive_measurer(const std::string &bench, const std::string &method,
                                           const Computation &c,
                                           std::unique_ptr<OnednnPrimitive> prim,
                                           const std::vector<int> &buffers) {
    auto st = std::make_shared<PrimitiveState>(
        PrimitiveState{c, looptool::make_buffers(c, 1), std::move(prim)});
    const looptool::Reference want = looptool::compute_reference(c, st->buffers);
    const std::vector<float *> p = st->buffers.pointers();
    std::vector<float *> bound;
    for (int i : buffers) bound.push_back(p.at(size_t(i)));
    st->prim->bind(bound);
    st->prim->run();
    if (const auto cmp = looptool::compare_outputs(c, want, st->buffers); !cmp.ok)
        throw Error(fmt::format("{} {} ({}): the library's result differs from the reference: {}",
                                bench, method, st->prim->implementation(), cmp.first_mismatch));
    return [st] {
        struct Active {  // the kernel's global, cleared however the measurement ends
            explicit Active(OnednnPrimitive *p) { g_primitive = p; }
            ~Active() { g_primitive = nullptr; }
        } active(st->prim.get());
        return looptool::measure_kernel_uncut(primitive_kernel, st->comp, st->buffers)
            .median_gflops;
    };
}

}  // namespace looptune::bench
