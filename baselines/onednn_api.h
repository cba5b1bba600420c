// The functions of oneDNN 2.6's C API the baselines call, resolved once from the library loaded
// at run time (onednn.cpp): one list and one table for every primitive built here.
#pragma once

#include <oneapi/dnnl/dnnl.h>

namespace looptune::bench {

// clang-format off
#define LOOPTUNE_DNNL_API(X)                      \
    X(dnnl_engine_create)                         \
    X(dnnl_engine_destroy)                        \
    X(dnnl_stream_create)                         \
    X(dnnl_stream_destroy)                        \
    X(dnnl_stream_wait)                           \
    X(dnnl_memory_desc_init_by_tag)               \
    X(dnnl_memory_desc_init_by_strides)           \
    X(dnnl_matmul_desc_init)                      \
    X(dnnl_binary_desc_init)                      \
    X(dnnl_eltwise_forward_desc_init)             \
    X(dnnl_softmax_forward_desc_init)             \
    X(dnnl_layer_normalization_forward_desc_init) \
    X(dnnl_primitive_desc_create)                 \
    X(dnnl_primitive_desc_destroy)                \
    X(dnnl_primitive_desc_query)                  \
    X(dnnl_primitive_create)                      \
    X(dnnl_primitive_destroy)                     \
    X(dnnl_primitive_execute)                     \
    X(dnnl_memory_create)                         \
    X(dnnl_memory_destroy)                        \
    X(dnnl_convolution_forward_desc_init)         \
    X(dnnl_primitive_desc_query_md)               \
    X(dnnl_memory_set_data_handle)                \
    X(dnnl_reorder_primitive_desc_create)         \
    X(dnnl_post_ops_create)                       \
    X(dnnl_post_ops_destroy)                      \
    X(dnnl_post_ops_append_eltwise)               \
    X(dnnl_post_ops_append_binary)                \
    X(dnnl_primitive_attr_create)                 \
    X(dnnl_primitive_attr_destroy)                \
    X(dnnl_primitive_attr_set_post_ops)
// clang-format on

struct OnednnApi {
#define LOOPTUNE_DNNL_FIELD(name) decltype(&::name) name = nullptr;
    LOOPTUNE_DNNL_API(LOOPTUNE_DNNL_FIELD)
#undef LOOPTUNE_DNNL_FIELD
};

/// The table, filled on first use (a missing library or symbol is an Error naming it).
const OnednnApi &onednn_api();

}  // namespace looptune::bench
