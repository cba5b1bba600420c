#include "baselines/onednn_api.h"

#include "baselines/reference_kernels.h"

namespace looptune::bench {

const OnednnApi &onednn_api() {
    static const OnednnApi a = [] {
        OnednnApi r;
#define LOOPTUNE_DNNL_LOAD(name) r.name = reinterpret_cast<decltype(&::name)>(onednn_symbol(#name));
        LOOPTUNE_DNNL_API(LOOPTUNE_DNNL_LOAD)
#undef LOOPTUNE_DNNL_LOAD
        return r;
    }();
    return a;
}

}  // namespace looptune::bench
