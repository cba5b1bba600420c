// The `tile` template's families (matmul and conv): which register tiles, blocks and loop orders
// it tries.
#include "search/tile_schedules.h"

#include <fmt/format.h>

namespace looptune {

std::string TileSchedule::name() const {
    std::string s = fmt::format("{}x{}", tm, tn);
    if (kb > 0) s += fmt::format(" kb{}", kb);
    if (nb > 0) s += fmt::format(" nb{}", nb);
    s += " " + outer;
    if (!vectorize_write) s += " scalar-write";
    if (pack_a) s += " packA";
    if (pack) s += " pack";
    return s;
}

std::vector<TileSchedule> schedule_family(int64_t m, int64_t n, int64_t k, bool layout) {
    std::vector<TileSchedule> f;
    const std::pair<int, int> tiles[] = {{8, 32}, {8, 16}, {4, 64}, {16, 16}, {4, 32}, {8, 64}};
    for (auto [tm, tn] : tiles)
        for (const char *outer : {"mn", "nm"}) f.push_back({tm, tn, 0, outer, true});
    if (k >= 256)
        for (auto [tm, tn] : {std::pair{8, 32}, std::pair{4, 64}})
            for (int kb : {128, 256})
                if (kb < k)
                    for (const char *outer : {"kmn", "mkn", "nkm"})
                        f.push_back({tm, tn, kb, outer, true});
    if (m >= 512 && n >= 512 && k >= 512)
        for (int kb : {128, 256})
            for (int nb : {256, 512})
                if (nb < n)
                    for (const char *outer : {"knmN", "nkmN"})
                        f.push_back({8, 32, kb, outer, true, nb});
    f.push_back({8, 32, 0, "mn", false});
    if (layout) {
        for (auto [tm, tn] :
             {std::pair{8, 32}, std::pair{4, 64}, std::pair{8, 16}, std::pair{16, 16}})
            for (const char *outer : {"nm", "mn"}) f.push_back({tm, tn, 0, outer, true, 0, true});
        if (k >= 256)
            for (const char *outer : {"kmn", "nkm"})
                f.push_back({8, 32, 256, outer, true, 0, true});
        for (auto [tm, tn] : {std::pair{8, 32}, std::pair{8, 16}, std::pair{16, 16}})
            for (const char *outer : {"mn", "nm"})
                f.push_back({tm, tn, 0, outer, true, 0, false, true});
    }
    return f;
}

std::string ConvTileSchedule::name() const {
    const std::string blocks = cb > 0 ? fmt::format(" c{}", cb) : "";
    if (vector_m && th > 1) return fmt::format("conv {}x{}x{} vm pack{}", tm, th, tw, blocks);
    if (vector_m) return fmt::format("conv {}x{} vm pack{}", tm, tw, blocks);
    return fmt::format("conv {}x{} {}{}{}", tm, tw, flat ? "flat" : outer, pack ? " pack" : "",
                       parallel ? " parallel" : "");
}

std::vector<ConvTileSchedule> conv_schedule_family(int64_t co, int64_t wo, int64_t hw,
                                                   bool layout) {
    std::vector<ConvTileSchedule> f;
    const std::pair<int, int> tiles[] = {{8, 32}, {4, 64}, {8, 16}, {16, 16}, {4, 32}};
    for (bool pack : {false, true}) {
        if (pack && !layout) break;
        for (auto [tm, tw] : tiles) {
            // A tile wider than the image repeats a narrower one (the whole row is the tile).
            if (tm > 8 && tm / 2 >= co) continue;
            if (!(tw > 16 && tw / 2 >= wo))
                for (const char *outer : {"mh", "hm"}) f.push_back({tm, tw, outer, false, pack});
            if (hw > 0 && !(tw > 16 && tw / 2 >= hw)) f.push_back({tm, tw, "mh", true, pack});
        }
    }
    // Channel-vectorized tiles: 64 x 4 and 32 x 8 columns, or a whole narrow row (up to 28
    // accumulators of the 32 vector registers).
    if (layout) {
        std::vector<std::pair<int, int>> vm = {{64, 4}, {32, 8}};
        if (wo <= 14 && wo != 8) vm.push_back({32, int(wo)});
        if (wo <= 28) vm.push_back({16, int(wo)});
        for (auto [tm, tw] : vm)
            if (tm / 2 < co && tw / 2 < wo) f.push_back({tm, tw, "mh", false, true, true});
        for (auto [tm, tw] : {std::pair{64, 4}, std::pair{32, 8}})
            if (tm / 2 < co && tw / 2 < wo)
                for (int cb : {8, 16}) f.push_back({tm, tw, "mh", false, true, true, 1, cb});
        // Rows of up to 7 columns: 2 rows x the row x 16 channels (14 accumulators), so a
        // weight vector loaded from L2 feeds 14 FMAs instead of 7.
        if (wo <= 7) f.push_back({16, int(wo), "mh", false, true, true, 2});
    }
    return f;
}

}  // namespace looptune
