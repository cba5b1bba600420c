#include "search/cache_blocks.h"

namespace looptune {

int64_t nkm_k_block(int64_t n, int64_t l1d_bytes) {
    // A row of 64 floats touches 4 lines where it starts one (16 divides n), else 5.
    const int64_t row_bytes = (n % 16 == 0 ? 4 : 5) * 64;
    int64_t kb = 256;
    while (kb > 16 && kb * row_bytes > l1d_bytes) kb /= 2;
    return kb;
}

int64_t l2_n_block(int64_t kb, int64_t l2_bytes) {
    int64_t nb = 2048;
    while (nb > 64 && kb * nb * 4 > l2_bytes / 2) nb /= 2;
    return nb;
}

}  // namespace looptune
