#include "baselines/onednn_matmul_postops.h"

#include <fmt/format.h>

#include <vector>

#include "baselines/onednn_primitive.h"
#include "baselines/reference_kernels.h"
#include "looptool/gen/epilogue.h"
#include "looptool/ir/error.h"

namespace looptune::bench {

using looptool::Computation;
using looptool::Error;

namespace {

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
    std::vector<int> buffers = {0, 1};
    if (e.bias >= 0) buffers.push_back(e.bias);
    if (e.residual >= 0) buffers.push_back(e.residual);
    buffers.push_back(int(c.num_buffers()) - 1);
    return primitive_measurer(bench, kOnednnMatmul, c, onednn_matmul_epilogue(e), buffers);
}

std::string onednn_postops_implementation(const Computation &c) {
    load_onednn();
    return onednn_matmul_epilogue(roles(c))->implementation();
}

}  // namespace looptune::bench
