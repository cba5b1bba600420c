// The roof: single-core FP32 peak from independent FMA chains, and MAX_GFLOPS, the figure
// rewards and "% of peak" are normalised by (as LoopTune's MAX_GFLOPS).
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"
#include "util/cache_dir.h"

namespace looptool {

namespace {

// Each kernel runs `iters` iterations of kChains independent FMA chains. Zen 5 and Skylake-X
// have an FMA latency of 4 cycles and 2 FMA pipes, so at least 8 chains are needed to keep both
// pipes busy; 16 leaves slack and still fits the 32 (AVX-512) or 16 (AVX2) vector registers.
// The chains converge (multiplier < 1), so no infinities or denormals appear.
constexpr int kChains = 16;
volatile float g_sink;

// The chains over GCC's vector extension, so one body serves every ISA: `acc * a + b` is one
// FMA where the caller's target has FMA (-ffp-contract=fast, GCC's default in gnu++20) and a
// multiply and an add, still two FLOPs, where it has not (SSE). At -O3 each target's loop is
// the 16 register-resident vfmadd132ps (zmm, ymm) or mulps/addps pairs per iteration that the
// intrinsics it replaced compiled to (compared in the assembly).
typedef float Floats16 __attribute__((vector_size(64)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats4 __attribute__((vector_size(16)));

template <typename V>
[[gnu::always_inline]] inline void fma_chains(int64_t iters) {
    constexpr int kLanes = sizeof(V) / sizeof(float);
    V acc[kChains];
    for (int i = 0; i < kChains; ++i) acc[i] = V{} + float(i) * 1e-3f;
    const V a = V{} + 0.999999f, b = V{} + 1e-7f;
    for (int64_t it = 0; it < iters; ++it)
        for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * a + b;
    V s = acc[0];
    for (int i = 1; i < kChains; ++i) s += acc[i];
    float sum = 0;
    for (int l = 0; l < kLanes; ++l) sum += s[l];
    g_sink = sum;
}

__attribute__((target("avx512f"))) void fma_chains_avx512(int64_t iters) {
    fma_chains<Floats16>(iters);
}
__attribute__((target("avx2,fma"))) void fma_chains_avx2(int64_t iters) {
    fma_chains<Floats8>(iters);
}
void fma_chains_sse(int64_t iters) { fma_chains<Floats4>(iters); }

struct Isa {
    const char *name;
    int lanes;
    void (*chains)(int64_t);
};

Isa widest_isa() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return {"avx512", 16, fma_chains_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return {"avx2", 8, fma_chains_avx2};
    return {"sse", 4, fma_chains_sse};
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            size_t colon = line.find(':');
            if (colon != std::string::npos) {
                size_t b = line.find_first_not_of(" \t", colon + 1);
                return b == std::string::npos ? "" : line.substr(b);
            }
        }
    return "unknown cpu";
}

std::string cache_path() {
    const std::string dir = looptune::looptune_cache_dir();
    return dir.empty() ? "" : dir + "/peak.json";
}

std::optional<double> env_max_gflops() {
    const char *s = std::getenv("MAX_GFLOPS");
    if (!s || !*s) return std::nullopt;
    char *end = nullptr;
    double v = std::strtod(s, &end);
    if (end == s || *end != '\0' || !(v > 0) || !std::isfinite(v))
        throw Error(fmt::format("MAX_GFLOPS='{}' is not a positive number", s));
    return v;
}

/// Throws Error naming the file unless `j` has the cache's shape: an object whose "machines",
/// when present, is an object (other keys are kept as they are). Checked before any
/// measurement, and before a file we do not understand would be overwritten.
void check_peak_cache(const std::string &path, const nlohmann::json &j) {
    if (!j.is_object())
        throw Error(fmt::format("{}: not a peak cache (JSON, but not an object); delete it", path));
    if (j.contains("machines") && !j["machines"].is_object())
        throw Error(
            fmt::format("{}: not a peak cache (\"machines\" is not an object); delete it", path));
}

/// The stored peak for this CPU model, if the cache file has one. A malformed cache file is
/// an error (it names the file) rather than silently re-measured over.
std::optional<double> stored_peak(const std::string &path, const std::string &model) {
    if (path.empty() || !std::filesystem::exists(path)) return std::nullopt;
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(read_file(path));
    } catch (const nlohmann::json::exception &e) {
        throw Error(fmt::format("{}: malformed peak cache ({}); delete it or run `looptool peak`",
                                path, e.what()));
    }
    check_peak_cache(path, j);
    if (!j.contains("machines") || !j["machines"].contains(model)) return std::nullopt;
    const auto &entry = j["machines"][model];
    if (!entry.is_object() || !entry.contains("gflops") || !entry["gflops"].is_number() ||
        !(entry["gflops"].get<double>() > 0) || !std::isfinite(entry["gflops"].get<double>()))
        throw Error(fmt::format("{}: entry for '{}' has no positive \"gflops\"", path, model));
    return entry["gflops"].get<double>();
}

}  // namespace

std::string cpu_model_name() { return cpu_model(); }

namespace {
// The answer for the current cache path, so the environment's per-step rewards do not re-read
// (or worse, re-measure) it. Keyed by path so a changed XDG_CACHE_HOME/HOME is honoured.
std::mutex g_known_mu;
std::string g_known_path;
double g_known = 0;
}  // namespace

namespace {
std::string store_peak_unlocked(const PeakResult &r) {
    const std::string path = cache_path(), model = cpu_model();
    if (path.empty()) throw Error("peak: neither XDG_CACHE_HOME nor HOME is set; nowhere to store");
    nlohmann::json j = nlohmann::json::object();
    if (std::filesystem::exists(path)) {
        try {
            j = nlohmann::json::parse(read_file(path));
        } catch (const nlohmann::json::exception &) {
            j = nlohmann::json::object();  // replaced by a well-formed file below
        }
        check_peak_cache(path, j);  // a malformed file is replaced; a foreign one is not
    }
    j["machines"][model] = {{"gflops", r.gflops}, {"isa", r.isa}};
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    if (ec) throw Error(fmt::format("{}: cannot create directory: {}", path, ec.message()));
    write_file_atomically(path, j.dump(2) + "\n");
    return path;
}
}  // namespace

std::string store_peak(const PeakResult &r) {
    std::lock_guard<std::mutex> lock(g_known_mu);
    std::string path = store_peak_unlocked(r);
    g_known_path = path;
    g_known = r.gflops;
    return path;
}

PeakResult measure_peak_gflops(double seconds) {
    if (!(seconds > 0))
        throw Error(fmt::format("peak: --seconds must be positive, got {}", seconds));
    Isa isa = widest_isa();
    // Calls of ~1 ms at peak, timed like a kernel: pinned, warm-ups (which also bring the core
    // to its FMA frequency), median of the calls.
    const int64_t iters = 16384;
    const double flops_per_call = double(iters) * kChains * isa.lanes * 2;
    Computation dummy;  // measure_kernel needs only flops(); a zero-statement computation
    Buffers none;
    static thread_local void (*current)(int64_t) = nullptr;
    static thread_local int64_t current_iters = 0;
    current = isa.chains;
    current_iters = iters;
    KernelFn fn = [](float *const *, const volatile int32_t *) { current(current_iters); };
    MeasureOptions o;
    o.warmup = 20;
    o.min_runs = 20;
    o.min_time_s = seconds;
    o.time_cap_s = std::max(4 * seconds, 2.0);
    Measurement m = measure_kernel(fn, dummy, none, o);
    double s = m.median_s;
    return {s > 0 ? flops_per_call / s * 1e-9 : 0.0, isa.name};
}

double max_gflops() {
    if (auto v = env_max_gflops()) return *v;
    return machine_peak_gflops();
}

double machine_peak_gflops() {
    std::lock_guard<std::mutex> lock(g_known_mu);
    const std::string path = cache_path();
    if (g_known > 0 && g_known_path == path) return g_known;
    double v;
    if (auto stored = stored_peak(path, cpu_model())) {
        v = *stored;
    } else {
        PeakResult r = measure_peak_gflops();
        // A cache that cannot be written costs a re-measurement next run, not this run.
        try {
            if (!path.empty()) store_peak_unlocked(r);
        } catch (const Error &e) {
            fmt::print(stderr, "warning: the measured peak is not kept: {}\n", e.what());
        }
        v = r.gflops;
    }
    g_known_path = path;
    g_known = v;
    return v;
}

}  // namespace looptool
