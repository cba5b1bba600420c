// Block sizes of the seed rules' tiles, from the machine's cache sizes (util/machine.h), so a
// rule sized on one CPU holds on another: a block meant to stay in L1 or L2 is sized by it.
#pragma once

#include <cstdint>

namespace looptune {

/// The k block of a 4x64 nkm tile: the most rows (a power of two, 16-256) whose 64 floats of B
/// fit an L1 of `l1d_bytes`, counting the 5 lines a row touches where 16 does not divide n.
int64_t nkm_k_block(int64_t n, int64_t l1d_bytes);
/// The n block (a power of two, 64-2048) of a kb x nb block of B that fits half an L2 of
/// `l2_bytes`, the rest left for A's rows and C's tiles.
int64_t l2_n_block(int64_t kb, int64_t l2_bytes);

}  // namespace looptune
