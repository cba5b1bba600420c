// The `tile` template's matmul family: which register tiles, blocks and loop orders it tries.
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

}  // namespace looptune
