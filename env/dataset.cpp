#include "env/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <set>

#include "looptool/ir/error.h"

namespace looptune {

namespace fs = std::filesystem;
using looptool::Error;

namespace {

/// Uniform in [0, bound] from raw mt19937_64 output by rejection, because
/// std::uniform_int_distribution's algorithm is left to the library and differs between
/// libstdc++ and libc++: a split must not change with the toolchain.
uint64_t uniform_upto(std::mt19937_64 &rng, uint64_t bound) {
    if (bound == std::numeric_limits<uint64_t>::max()) return rng();
    const uint64_t range = bound + 1;
    const uint64_t limit =
        std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % range;
    uint64_t x;
    do x = rng();
    while (x >= limit);
    return x % range;
}

template <class T>
void fisher_yates(std::vector<T> &v, std::mt19937_64 &rng) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[uniform_upto(rng, i - 1)]);
}

bool is_benchmark_file(const fs::directory_entry &e) {
    std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') return false;
    if (name.find(".tmp.") != std::string::npos) return false;  // an unfinished atomic write
    // Documentation kept beside the benchmarks (datasets/models/SOURCES.md).
    if (name.size() > 3 && name.ends_with(".md")) return false;
    std::error_code ec;
    return e.is_regular_file(ec);
}

}  // namespace

Split parse_split(const std::string &name) {
    if (name == "train") return Split::Train;
    if (name == "test") return Split::Test;
    if (name == "all") return Split::All;
    throw Error(fmt::format("unknown split '{}' (expected train, test or all)", name));
}

std::vector<std::string> Dataset::looptune_test_names() {
    // LoopTune's 25 final-evaluation benchmarks: column `benchmark` of
    // corpus/looptune/results/test.csv.
    return {"mm112_208_256", "mm112_224_128", "mm112_256_64",  "mm112_256_80",  "mm128_160_224",
            "mm160_224_192", "mm176_128_160", "mm176_144_160", "mm176_192_160", "mm192_192_80",
            "mm192_256_256", "mm208_128_256", "mm208_160_80",  "mm208_80_224",  "mm224_112_176",
            "mm224_208_224", "mm224_224_256", "mm224_64_240",  "mm240_208_144", "mm256_160_112",
            "mm64_240_64",   "mm80_176_224",  "mm96_160_256",  "mm96_224_240",  "mm96_240_128"};
}

std::vector<std::string> Dataset::looptune_conv_test_names() {
    // loopstack/looptune, commit 8ec010b, loop_tool_service/benchmarks/conv_test/conv/: every
    // one has batch 32 or 64 and most a 256x256 image, so LoopTune tested on its largest convs
    // (the 62 of conv_train/ are the rest of the 81).
    return {"conv32_128_112_112__64_128_3_3", "conv32_128_256_256__1_128_3_3",
            "conv32_128_256_256__32_128_3_3", "conv32_128_256_256__64_128_3_3",
            "conv32_32_256_256__32_32_3_3",   "conv32_32_256_256__64_32_3_3",
            "conv32_64_256_256__32_64_3_3",   "conv32_64_256_256__64_64_3_3",
            "conv64_128_112_112__32_128_3_3", "conv64_128_112_112__64_128_3_3",
            "conv64_128_256_256__1_128_3_3",  "conv64_128_256_256__32_128_3_3",
            "conv64_128_256_256__64_128_3_3", "conv64_32_256_256__32_32_3_3",
            "conv64_32_256_256__64_32_3_3",   "conv64_64_112_112__64_64_3_3",
            "conv64_64_256_256__1_64_3_3",    "conv64_64_256_256__32_64_3_3",
            "conv64_64_256_256__64_64_3_3"};
}

std::vector<std::string> Dataset::looptune_forced_test_names() {
    std::vector<std::string> all = looptune_test_names();
    for (auto &n : looptune_conv_test_names()) all.push_back(std::move(n));
    return all;
}

Dataset Dataset::load(const std::string &dir, uint64_t seed, double test_fraction,
                      const std::vector<std::string> &forced_test) {
    if (!(test_fraction >= 0 && test_fraction <= 1))
        throw Error(fmt::format("test fraction {} is outside [0, 1]", test_fraction));
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw Error(fmt::format("{}: dataset directory does not exist or is not a directory", dir));

    std::vector<fs::path> paths;
    fs::directory_iterator it(dir, ec);
    if (ec) throw Error(fmt::format("{}: cannot list dataset directory: {}", dir, ec.message()));
    for (const auto &e : it)
        if (is_benchmark_file(e)) paths.push_back(e.path());
    if (paths.empty())
        throw Error(fmt::format("{}: dataset directory has no benchmark files", dir));
    std::sort(paths.begin(), paths.end(),
              [](const fs::path &a, const fs::path &b) { return a.filename() < b.filename(); });

    const std::set<std::string> forced(forced_test.begin(), forced_test.end());
    Dataset d;
    d.dir = dir;
    std::vector<std::string> rest;
    for (const auto &p : paths) {
        bool is_forced = forced.count(p.filename().string()) || forced.count(p.stem().string());
        (is_forced ? d.test : rest).push_back(p.string());
    }

    const auto n = int64_t(paths.size());
    const int64_t want_test = std::llround(test_fraction * double(n));
    const int64_t extra =
        std::clamp<int64_t>(want_test - int64_t(d.test.size()), 0, int64_t(rest.size()));
    std::mt19937_64 rng(seed);
    fisher_yates(rest, rng);
    d.test.insert(d.test.end(), rest.begin(), rest.begin() + extra);
    d.train.assign(rest.begin() + extra, rest.end());

    auto by_name = [](const std::string &a, const std::string &b) {
        return fs::path(a).filename() < fs::path(b).filename();
    };
    std::sort(d.test.begin(), d.test.end(), by_name);
    std::sort(d.train.begin(), d.train.end(), by_name);
    return d;
}

std::vector<std::string> Dataset::files(Split s) const {
    if (s == Split::Train) return train;
    if (s == Split::Test) return test;
    std::vector<std::string> all;
    all.reserve(train.size() + test.size());
    std::merge(train.begin(), train.end(), test.begin(), test.end(), std::back_inserter(all),
               [](const std::string &a, const std::string &b) {
                   return fs::path(a).filename() < fs::path(b).filename();
               });
    return all;
}

}  // namespace looptune
