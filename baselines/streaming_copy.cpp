// The streaming copy of onednn_rowop.h: a plain loop, compiled -O3 -march=native (vector loads
// and stores, as a memcpy of that size would run them).
#include <cstddef>
#include <cstdint>

namespace looptune::bench {

void streaming_copy(const float *__restrict x, float *__restrict y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

}  // namespace looptune::bench
