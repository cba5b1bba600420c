// The cost model's features (cost_model.h), read from a schedule's canonical key:
//   name|var=extent|...|S<tensor><AxB>|...|N[h<shared>]s<stmt>...:<var>,<size>,<tail>[u][v][p]...
// The compute nest is the one with the most loops (a matmul's or conv's reduction nest; the
// others write the result or copy a packed block).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "looptool/ir/error.h"
#include "tune/cost_model.h"

namespace looptune {

namespace {

/// Variables given their own features (a conv2d has 7); later ones count only in totals.
constexpr int kVarFeatures = 7;

struct KeyLoop {
    int var = 0;
    int64_t size = 1, tail = 0;
    bool unroll = false, vectorize = false, parallel = false;
};
struct KeyNest {
    int shared = 0;
    std::vector<KeyLoop> loops;
};
struct KeySchedule {
    std::vector<int64_t> extents;
    int packed = 0;
    std::vector<KeyNest> nests;
};

std::vector<std::string> split_bars(const std::string &s) {
    std::vector<std::string> out(1);
    for (char c : s) {
        if (c == '|')
            out.emplace_back();
        else
            out.back() += c;
    }
    return out;
}

int64_t to_int(const std::string &text, const std::string &key) {
    size_t used = 0;
    int64_t v = -1;
    try {
        v = std::stoll(text, &used);
    } catch (const std::exception &) {
        used = 0;
    }
    if (used == 0 || used != text.size() || v < 0)
        throw looptool::Error(fmt::format("schedule key '{}': '{}' is not a count", key, text));
    return v;
}

KeyLoop parse_loop(const std::string &text, const std::string &key) {
    KeyLoop l;
    size_t end = text.size();
    while (end > 0 && std::isalpha(static_cast<unsigned char>(text[end - 1]))) {
        const char f = text[--end];
        l.unroll |= f == 'u';
        l.vectorize |= f == 'v';
        l.parallel |= f == 'p';
    }
    const std::string nums = text.substr(0, end);
    const size_t c1 = nums.find(','), c2 = nums.find(',', c1 == std::string::npos ? 0 : c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos)
        throw looptool::Error(fmt::format("schedule key '{}': bad loop '{}'", key, text));
    l.var = int(to_int(nums.substr(0, c1), key));
    l.size = to_int(nums.substr(c1 + 1, c2 - c1 - 1), key);
    l.tail = to_int(nums.substr(c2 + 1), key);
    return l;
}

KeyNest parse_nest(const std::string &text, const std::string &key, size_t vars) {
    KeyNest n;
    size_t colon = text.find(':');
    const std::string head =
        text.substr(1, colon == std::string::npos ? std::string::npos : colon - 1);
    if (!head.empty() && head[0] == 'h')
        n.shared = int(to_int(head.substr(1, head.find('s') - 1), key));
    while (colon != std::string::npos) {
        const size_t next = text.find(':', colon + 1);
        n.loops.push_back(
            parse_loop(text.substr(colon + 1, next == std::string::npos ? std::string::npos
                                                                        : next - colon - 1),
                       key));
        if (size_t(n.loops.back().var) >= vars)
            throw looptool::Error(fmt::format("schedule key '{}': loop over variable {} of {}", key,
                                              n.loops.back().var, vars));
        colon = next;
    }
    return n;
}

KeySchedule parse_key(const std::string &key) {
    const std::vector<std::string> parts = split_bars(key);
    KeySchedule s;
    for (size_t i = 1; i < parts.size(); ++i) {
        const std::string &p = parts[i];
        if (const size_t eq = p.find('='); eq != std::string::npos)
            s.extents.push_back(to_int(p.substr(eq + 1), key));
        else if (!p.empty() && p[0] == 'S')
            ++s.packed;
        else if (!p.empty() && p[0] == 'N')
            s.nests.push_back(parse_nest(p, key, s.extents.size()));
        else
            throw looptool::Error(fmt::format("schedule key '{}': unknown part '{}'", key, p));
    }
    if (s.extents.empty() || s.nests.empty())
        throw looptool::Error(fmt::format("schedule key '{}': no variables or no loop nests", key));
    return s;
}

double lg(double x) { return std::log2(1 + std::max(0.0, x)); }

/// Elements loop `d` of `n` covers (loop_tree.h's arithmetic, from the key's loops).
int64_t key_coverage(const KeyNest &n, size_t d) {
    int64_t inner = 1;
    for (size_t e = n.loops.size(); e-- > d + 1;)
        if (n.loops[e].var == n.loops[d].var) {
            inner = key_coverage(n, e);
            break;
        }
    return n.loops[d].size * inner + n.loops[d].tail;
}

/// log2 of the elements the innermost `count` loops of `n` span, over every variable.
double tile_volume(const KeyNest &n, size_t count, size_t vars) {
    std::vector<int64_t> span(vars, 1);
    const size_t from = n.loops.size() > count ? n.loops.size() - count : 0;
    for (size_t d = n.loops.size(); d-- > from;) span[size_t(n.loops[d].var)] = key_coverage(n, d);
    double v = 0;
    for (int64_t e : span) v += std::log2(double(e));
    return v;
}

}  // namespace

const std::vector<std::string> &schedule_feature_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n = {
            "log_volume", "nests",        "packed",      "loops",    "shared_loops", "inner_span",
            "inner_vec",  "inner_unroll", "unroll_tile", "unrolled", "vectorized",   "parallel",
            "tails",      "tile2",        "tile3",       "tile4",    "vec_x_unroll"};
        for (int j = 0; j < kVarFeatures; ++j)
            for (const char *f : {"extent", "inner_span", "depth", "innermost", "splits"})
                n.push_back(fmt::format("var{}_{}", j, f));
        return n;
    }();
    return names;
}

std::vector<double> schedule_features(const std::string &key) {
    const KeySchedule s = parse_key(key);
    const size_t vars = s.extents.size();
    const KeyNest &main = *std::max_element(
        s.nests.begin(), s.nests.end(),
        [](const KeyNest &a, const KeyNest &b) { return a.loops.size() < b.loops.size(); });
    double volume = 0;
    for (int64_t e : s.extents) volume += std::log2(double(std::max<int64_t>(e, 1)));
    int shared = 0, vectorized = 0, parallel = 0, tails = 0;
    for (const KeyNest &n : s.nests) {
        shared += n.shared;
        for (const KeyLoop &l : n.loops) {
            vectorized += l.vectorize;
            parallel += l.parallel;
            tails += l.tail > 0;
        }
    }
    double unroll_tile = 0;
    int unrolled = 0;
    for (const KeyLoop &l : main.loops)
        if (l.unroll) {
            unroll_tile += std::log2(double(std::max<int64_t>(l.size, 1)));
            ++unrolled;
        }
    const bool has_loops = !main.loops.empty();
    const KeyLoop inner = has_loops ? main.loops.back() : KeyLoop{};
    const double inner_span = has_loops ? lg(double(key_coverage(main, main.loops.size() - 1))) : 0;
    std::vector<double> f = {volume / 10,
                             double(s.nests.size()),
                             double(s.packed),
                             double(main.loops.size()),
                             double(shared),
                             inner_span,
                             double(inner.vectorize),
                             double(inner.unroll),
                             unroll_tile,
                             double(unrolled),
                             double(vectorized),
                             double(parallel > 0),
                             double(tails),
                             tile_volume(main, 2, vars),
                             tile_volume(main, 3, vars),
                             tile_volume(main, 4, vars),
                             double(inner.vectorize) * unroll_tile};
    for (size_t j = 0; j < size_t(kVarFeatures); ++j) {
        double span = 0, depth = 0, splits = 0;
        for (size_t d = 0; d < main.loops.size(); ++d)
            if (size_t(main.loops[d].var) == j) {
                span = lg(double(key_coverage(main, d)));
                depth = double(d + 1) / double(main.loops.size());
                ++splits;
            }
        f.push_back(j < vars ? std::log2(double(std::max<int64_t>(s.extents[j], 1))) : 0);
        f.push_back(span);
        f.push_back(depth);
        f.push_back(has_loops && size_t(inner.var) == j);
        f.push_back(splits);
    }
    return f;
}

}  // namespace looptune
