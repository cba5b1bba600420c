// The family of matmul schedules the `best` benchmark searches, each expressed as an action
// sequence from the naive nest (m, k, n compute nest; m, n write nest) so that it is a
// schedule an agent with the `full` action space can reach; and its conv2d counterpart
// (ConvTileSchedule). The `tile` search tries whichever family fits the benchmark.
//
// A TileSchedule is a register tile tm x tn (split m by tm, n by tn; m_i unrolled, n_i
// vectorized, k just outside the tile so the tile's accumulators stay in registers), an
// optional k block kb outside the tile, the order of the outer loops, and whether the write
// nest (T -> C) is vectorized.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "looptool/actions/actions.h"

namespace looptune {

struct TileSchedule {
    int tm = 8;   ///< rows of the register tile (m_i, unrolled)
    int tn = 32;  ///< columns of the register tile (n_i, vectorized)
    int kb = 0;   ///< k block outside the tile; 0: none
    /// Order of the outer loops, outermost first: a permutation of "mn", plus "k" when kb > 0
    /// (the k block loop) and "N" when nb > 0 (then "n" is the n block loop and "N" the loop
    /// over tiles inside it). The loops inside are always k(_i), m_i, n_i.
    std::string outer = "mn";
    bool vectorize_write = true;  ///< split the write nest's n by 16 and vectorize it
    int nb = 0;                   ///< n block (a multiple of tn) outside the tile columns; 0: none
    /// Last, `pack` B under the outermost m loop (layout action, docs/actions.md): B's tn-wide
    /// column panels (kb x tn blocks with a k block) become contiguous. Where tn does not
    /// divide n, B's columns stay whole, its rows padded to a line: B^T where B is strided
    /// along n (attention's K), else B's own layout where its rows do not start lines.
    bool pack = false;
    /// Before that, `pack` A under the outermost n loop: each tm-row block of A becomes
    /// [k][m_i], so the tile's broadcasts of its tm rows read one contiguous stream (rows 4 KB
    /// apart, k a multiple of 1024, otherwise fall in one L1 set). The copy is a register
    /// transpose for tm = 8 or 16 (docs/actions.md). Where tm does not divide m, A^T ([k][m]).
    bool pack_a = false;

    std::string name() const;  // e.g. "8x32 mn", "8x32 kb256 kmn pack", "8x16 mn packA"
};

/// The hand schedule (8x32 tile, m_o n_o k m_i n_i) as actions from the naive nest of
/// make_matmul(m, n, k): split_8, down, down, down, split_32, swap_up, swap_up, down,
/// swap_down, unroll, down, vectorize, then the write nest. Splits whose factor covers the
/// whole loop are left out (the loop itself is the tile dimension). Throws looptool::Error if
/// a step is illegal for this shape.
std::vector<looptool::Action> tile_actions(const looptool::Computation &c, const TileSchedule &s);

/// The variants tried per shape: tiles 8x32, 8x16, 4x64, 16x16, 4x32, 8x64 in both outer
/// orders; for k >= 256, k blocks of 128 and 256 in orders kmn, mkn, nkm for the 8x32 and 4x64
/// tiles; for m, n, k >= 512, the 8x32 tile with k blocks of 128/256 and n blocks of
/// 256/512 in orders knmN, nkmN (B block kb x nb kept in L2 while m sweeps); and the 8x32 tile
/// with a scalar write nest, to show what vectorizing it is worth. With `layout` (the action
/// space has `pack`), also the 8x32, 4x64, 8x16 and 16x16 tiles in both orders and the k-blocked
/// 8x32 ones with B packed, and the 8x32, 8x16 and 16x16 tiles in both orders with A packed.
std::vector<TileSchedule> schedule_family(int64_t m, int64_t n, int64_t k, bool layout = false);

/// The conv2d counterpart (make_conv2d's nest n, c, ho, wo, kh, kw, m and its write nest
/// n, m, ho, wo): a register tile of tm output channels x tw output columns (m split by tm and
/// unrolled, wo split by tw and vectorized: Y and X are contiguous along wo), the reduction
/// c, kh, kw just outside the tile, so each X vector loaded for a (c, kh, kw) feeds tm FMAs and
/// each broadcast weight tw / 16 of them. `outer` orders the loops outside the reduction:
/// "mh" is n, m_o, ho, wo_o; "hm" is n, ho, m_o, wo_o (a row of X stays in cache across the
/// m blocks).
struct ConvTileSchedule {
    int tm = 8;   ///< output channels of the register tile (m_i, unrolled)
    int tw = 32;  ///< output columns of the register tile (wo_i, vectorized)
    std::string outer = "mh";
    /// 1x1 convs: `flatten` ho and wo first (layout action, docs/actions.md), so the tile's
    /// columns run over ho * wo, contiguous in X and Y; `outer` is then n, m_o, hw_o. With a
    /// stride, X's subsample is packed first (`pack` under m: a dense copy, vectorized along
    /// its rows), so that it is contiguous too.
    bool flat = false;
    /// Last, `pack` W under the output-row loop (layout action): each block of tm output
    /// channels' weights becomes contiguous, [m_o][c][kh][kw][m_i]. Needs tm | co.
    bool pack = false;
    /// The tile the other way round (oneDNN's blocked-layout kernels): tm output channels
    /// vectorized (innermost) x tw output columns unrolled, loops n, m_o, ho, wo_o, c, kh, kw,
    /// wo_i, m_i; each step loads one vector of packed weights and broadcasts tw inputs. For
    /// narrow images (7-14 columns), where a vector along wo is mostly empty. Always packed.
    bool vector_m = false;
    /// vector_m only: output rows unrolled with the columns (ho split by th, inside the
    /// reduction), so each weight vector feeds th * tw FMAs; 1: one row.
    int th = 1;
    /// vector_m only: input channels in blocks of cb (0: not split), the block loop right below
    /// the output-row loop, so one row of output tiles sums cb channels at a time. Where X's
    /// channel planes are a multiple of 4 KB apart (256x256 images: 256 KB), all channels'
    /// pixels of one tile fall in one L1 and one L2 set, and a tile summing 128 of them misses
    /// both; cb of them fit the sets' ways.
    int cb = 0;
    /// Above one thread (unpacked "mh" or flat tiles whose output channels split): the
    /// channel-block loop moved above the batch loop and made `parallel` right after the split,
    /// so an agent's episode reaches the mark within its first steps (a batch of one leaves the
    /// naive nest's outermost loop nothing to split).
    bool parallel = false;
    std::string name() const;  // e.g. "conv 8x32 mh", "conv 8x32 flat", "conv 16x16 hm pack"
};

/// The actions from the naive nest of a make_conv2d computation (vars found by their role in
/// the accesses, so imported LoopTune files work too). Splits whose factor covers the whole
/// loop are left out. Throws looptool::Error if `c` is not a conv2d, a step is illegal or the
/// channel blocks (cb) would cover every input channel.
std::vector<looptool::Action> conv_tile_actions(const looptool::Computation &c,
                                                const ConvTileSchedule &s);

/// The conv variants tried per shape: tiles 8x32, 4x64, 8x16, 16x16, 4x32 (6 to 16
/// accumulator registers of 16 floats) in both outer orders, tiles wider than wo skipped when
/// a narrower one already covers it; with `hw` > 0 (a 1x1 conv of ho * wo = hw outputs per
/// channel) also the same tiles `flat` over hw; with `layout`, every member also with W packed,
/// and the `vector_m` tiles 64x4, 32x8 and whole rows of up to 14 (32 channels) or 28 (16)
/// columns (channels x columns), plus 16 channels x 2 rows for images up to 7 columns wide.
/// Flat and packed members need the `layout` action space.
std::vector<ConvTileSchedule> conv_schedule_family(int64_t co, int64_t wo, int64_t hw = 0,
                                                   bool layout = false);

/// A conv2d's sizes as the conv family needs them: output channels, output columns, and for a
/// 1x1 conv the outputs per channel (else 0). nullopt when `c` is not a conv2d.
struct ConvShape {
    int64_t co = 0, wo = 0, hw = 0, ci = 0;
    int64_t batch = 0, ho = 0;  ///< images, output rows
};
std::optional<ConvShape> conv_shape(const looptool::Computation &c);

/// A batched conv2d's slice of `images` images: the same computation with the batch variable n
/// of that extent (and every tensor dimension it indexes), named "<name> (<images> of <N>
/// images)". nullopt when `c` is not a conv2d or its batch is not larger. An action sequence
/// from the slice's naive nest applies to the whole batch's and does the same there when n's
/// loop runs more than once in both (images >= 2): the naive nests have the same loops, and
/// legality differs only for splits, unrolls and vectorization of n itself (its extent) and
/// for `pack`, which copies a block inside the loops above it only when each of them is over the
/// packed tensor or runs once. Tuning a batch-64 conv searches on two images, whose calls take
/// 1/32 of the batch's (guided_search.h).
std::optional<looptool::Computation> conv_batch_slice(const looptool::Computation &c,
                                                      int64_t images);

/// A conv2d's band of its first `rows` output rows: the same computation with the output-row
/// variable ho of that extent, and the dimensions it indexes alone (the output's and its
/// accumulator's rows) of that size; X keeps its shape, so its rows and channel planes stay
/// as far apart as in the whole conv (the channel blocks of the c16 seed are for those
/// strides). Named "<name> (<rows> of <Ho> rows)". nullopt when `c` is not a conv2d or ho is
/// not longer. As with conv_batch_slice(), actions from the band's naive nest apply to the
/// whole conv's and do the same there while ho's loop runs more than once in both: only
/// splits of ho whose factor does not divide both extents the same way leave other tails.
std::optional<looptool::Computation> conv_row_band(const looptool::Computation &c, int64_t rows);

/// The band conv_row_band() takes to search `c` (a conv2d, or its batch slice): the fewest
/// output rows of the form 8j + (ho mod 8), j >= 1 (splits of ho by 2, 4 and 8 then leave the
/// same tail in the band as in the whole conv), whose computation has at least `flops`; 0 (no
/// band) when that is more than half of ho's rows, or `c` is not a conv2d.
int64_t conv_band_rows(const looptool::Computation &c, double flops);

/// "split_8,down,..." for documentation and `looptool read --actions`.
std::string format_actions(const std::vector<looptool::Action> &actions);

}  // namespace looptune
