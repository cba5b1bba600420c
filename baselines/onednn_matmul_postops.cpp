#include "baselines/onednn_matmul_postops.h"

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "baselines/onednn_api.h"
#include "baselines/reference_kernels.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"

namespace looptune::bench {

using looptool::Computation;
using looptool::Error;

namespace {

const OnednnApi &api() { return onednn_api(); }

void check(dnnl_status_t s, const char *what) { onednn_check(s, what); }

dnnl_alg_kind_t eltwise_of(looptool::Activation a) {
    switch (a) {
        case looptool::Activation::None: return dnnl_alg_kind_undef;
        case looptool::Activation::Relu: return dnnl_eltwise_relu;
        case looptool::Activation::Gelu: return dnnl_eltwise_gelu_erf;
        case looptool::Activation::GeluTanh: return dnnl_eltwise_gelu_tanh;
    }
    return dnnl_alg_kind_undef;
}

// C = act(A B + bias) + R as one primitive: bias descriptor, eltwise post-op, binary add post-op.
struct MatmulPrimitive {
    dnnl_engine_t engine = nullptr;
    dnnl_stream_t stream = nullptr;
    dnnl_primitive_desc_t pd = nullptr;
    dnnl_primitive_t prim = nullptr;
    dnnl_memory_desc_t a{}, b{}, bias{}, c{};
    std::vector<dnnl_memory_t> mems;
    std::vector<dnnl_exec_arg_t> args;

    explicit MatmulPrimitive(const looptool::MatmulEpilogue &e) {
        const OnednnApi &x = api();
        onednn_set_threads();
        check(x.dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
        check(x.dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream");
        const dnnl_dims_t ad = {e.m, e.k}, bd = {e.k, e.n}, cd = {e.m, e.n}, vd = {1, e.n};
        check(x.dnnl_memory_desc_init_by_tag(&a, 2, ad, dnnl_f32, dnnl_ab), "A desc");
        check(x.dnnl_memory_desc_init_by_tag(&b, 2, bd, dnnl_f32, dnnl_ab), "B desc");
        check(x.dnnl_memory_desc_init_by_tag(&c, 2, cd, dnnl_f32, dnnl_ab), "C desc");
        check(x.dnnl_memory_desc_init_by_tag(&bias, 2, vd, dnnl_f32, dnnl_ab), "bias desc");
        dnnl_matmul_desc_t d;
        check(x.dnnl_matmul_desc_init(&d, &a, &b, e.epilogue.bias ? &bias : nullptr, &c),
              "matmul descriptor");
        dnnl_post_ops_t po = nullptr;
        dnnl_primitive_attr_t attr = nullptr;
        check(x.dnnl_post_ops_create(&po), "post-ops");
        if (e.epilogue.act != looptool::Activation::None)
            check(x.dnnl_post_ops_append_eltwise(po, 1.0f, eltwise_of(e.epilogue.act), 0, 0),
                  "eltwise post-op");
        if (e.epilogue.residual)
            check(x.dnnl_post_ops_append_binary(po, dnnl_binary_add, &c), "binary post-op");
        check(x.dnnl_primitive_attr_create(&attr), "attributes");
        check(x.dnnl_primitive_attr_set_post_ops(attr, po), "attributes' post-ops");
        const dnnl_status_t s = x.dnnl_primitive_desc_create(&pd, &d, attr, engine, nullptr);
        x.dnnl_primitive_attr_destroy(attr);
        x.dnnl_post_ops_destroy(po);
        check(s, "matmul primitive descriptor");
        check(x.dnnl_primitive_create(&prim, pd), "primitive");
    }
    ~MatmulPrimitive() {
        const OnednnApi &x = api();
        for (dnnl_memory_t m : mems) x.dnnl_memory_destroy(m);
        if (prim) x.dnnl_primitive_destroy(prim);
        if (pd) x.dnnl_primitive_desc_destroy(pd);
        if (stream) x.dnnl_stream_destroy(stream);
        if (engine) x.dnnl_engine_destroy(engine);
    }
    void bind(int arg, const dnnl_memory_desc_t &md, float *p) {
        dnnl_memory_t m = nullptr;
        check(api().dnnl_memory_create(&m, &md, engine, p), "memory");
        mems.push_back(m);
        args.push_back({arg, m});
    }
    void run() {
        const OnednnApi &x = api();
        onednn_set_threads();  // OpenMP's thread count is per calling thread
        if (x.dnnl_primitive_execute(prim, stream, int(args.size()), args.data()) != dnnl_success)
            std::abort();
        x.dnnl_stream_wait(stream);
    }
    std::string implementation() const {
        const char *name = nullptr;
        check(api().dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name),
              "implementation query");
        return name ? name : "?";
    }
};

MatmulPrimitive *g_prim = nullptr;

void matmul_kernel(float *const *, const volatile int32_t *) { g_prim->run(); }

struct State {
    Computation comp;
    looptool::Buffers buffers;
    std::unique_ptr<MatmulPrimitive> prim;
};

looptool::MatmulEpilogue roles(const Computation &c) {
    const auto e = looptool::matmul_epilogue(c);
    if (!e)
        throw Error(
            fmt::format("{}: {} runs only on a matmul with an epilogue as generate "
                        "--epilogue writes it",
                        c.name, kOnednnMatmul));
    return *e;
}

}  // namespace

bool onednn_postops_runs_on(const Computation &c) {
    return looptool::matmul_epilogue(c).has_value();
}

std::function<double()> onednn_postops_measurer(const std::string &bench, const Computation &c) {
    const looptool::MatmulEpilogue e = roles(c);
    load_onednn();
    auto st = std::make_shared<State>(State{c, looptool::make_buffers(c, 1), nullptr});
    const looptool::Reference want = looptool::compute_reference(c, st->buffers);
    st->prim = std::make_unique<MatmulPrimitive>(e);
    std::vector<float *> p = st->buffers.pointers();
    MatmulPrimitive &m = *st->prim;
    m.bind(DNNL_ARG_SRC, m.a, p[0]);
    m.bind(DNNL_ARG_WEIGHTS, m.b, p[1]);
    if (e.bias >= 0) m.bind(DNNL_ARG_BIAS, m.bias, p[size_t(e.bias)]);
    if (e.residual >= 0)
        m.bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(e.epilogue.act != looptool::Activation::None) |
                   DNNL_ARG_SRC_1,
               m.c, p[size_t(e.residual)]);
    m.bind(DNNL_ARG_DST, m.c, p.back());
    m.run();
    if (const auto cmp = looptool::compare_outputs(c, want, st->buffers); !cmp.ok)
        throw Error(fmt::format("{} {} ({}): the library's result differs from the reference: {}",
                                bench, kOnednnMatmul, m.implementation(), cmp.first_mismatch));
    return [st] {
        struct Active {  // the kernel's global, cleared however the measurement ends
            explicit Active(MatmulPrimitive *p) { g_prim = p; }
            ~Active() { g_prim = nullptr; }
        } active(st->prim.get());
        return looptool::measure_kernel_uncut(matmul_kernel, st->comp, st->buffers).median_gflops;
    };
}

std::string onednn_postops_implementation(const Computation &c) {
    load_onednn();
    MatmulPrimitive p(roles(c));
    return p.implementation();
}

}  // namespace looptune::bench
