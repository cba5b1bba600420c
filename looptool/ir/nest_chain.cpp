#include "looptool/ir/nest_chain.h"

#include <algorithm>
#include <climits>

namespace looptool {

std::vector<Attached> attached_nests(const LoopTree &t, int n) {
    std::vector<Attached> out;
    const int start = t.nests[size_t(n)].shared;  // where n's own walk starts
    int least = INT_MAX;                          // the fewest loops a nest in between shares
    for (int i = n - 1; i >= 0 && t.nests[size_t(i)].shared > 0; --i) {
        const int s = t.nests[size_t(i)].shared;
        if (s < least && s >= start) out.insert(out.begin(), Attached{i, s});
        least = std::min(least, s);
    }
    return out;
}

}  // namespace looptool
