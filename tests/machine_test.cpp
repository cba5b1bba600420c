// The machine's figures (util/machine.h, looptool/measure/machine.h): the one sysfs reader on a
// fake sysfs, its fallbacks, the lowering and the traffic model reading through it; the machine
// vector's scales and bounds, and the vector in every observation (tensor, flat RL state, graph)
// on random walks.
#include "util/machine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "env/environment.h"
#include "env/observation_bounds.h"
#include "env/observations.h"
#include "env/rl_state.h"
#include "looptool/lower/lower_stream.h"
#include "looptool/measure/machine.h"
#include "looptool/measure/traffic.h"
#include "test_util.h"

using namespace looptune;
using looptool::tests::TempDir;
namespace fs = std::filesystem;

namespace {

void write(const fs::path &path, const std::string &text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text << "\n";
}

// One sysfs cache entry: dir/indexI/{level,type,size,shared_cpu_list}.
void cache_entry(const fs::path &dir, int i, int level, const std::string &type,
                 const std::string &size, const std::string &shared = "0") {
    const fs::path index = dir / ("index" + std::to_string(i));
    write(index / "level", std::to_string(level));
    write(index / "type", type);
    write(index / "size", size);
    write(index / "shared_cpu_list", shared);
}

looptool::Program matmul(int64_t m, int64_t n, int64_t k) {
    return looptool::Program::naive(
        std::make_shared<looptool::Computation>(looptool::make_matmul(m, n, k)));
}

EnvConfig unmeasured(int threads) {
    EnvConfig c;
    c.measure_enabled = false;
    c.threads = threads;
    c.max_steps = 12;
    return c;
}

}  // namespace

TEST(MachineFigures, CacheSizesComeFromSysfs) {
    TempDir dir("fake_sysfs");
    const fs::path d = dir.path;
    cache_entry(d, 0, 1, "Data", "48K");
    cache_entry(d, 1, 1, "Instruction", "32K");  // not the data cache
    cache_entry(d, 2, 2, "Unified", "2048K");
    cache_entry(d, 3, 3, "Unified", "105M", "0-51,104-155");
    const CacheSizes c = read_cache_sizes(d.string());
    EXPECT_EQ(c.l1d, 48 << 10);
    EXPECT_EQ(c.l2, 2 << 20);
    EXPECT_EQ(c.l3, int64_t(105) << 20);
    EXPECT_EQ(c.l3_sharing, 104);
    EXPECT_EQ(c.l3_per_core(), (int64_t(105) << 20) / 104);
    EXPECT_EQ(c.llc, int64_t(105) << 20);
}

TEST(MachineFigures, AbsentOrNonsenseSysfsGivesTheFallbacks) {
    TempDir dir("bad_sysfs");
    const CacheSizes fallback;
    const CacheSizes absent = read_cache_sizes((dir.path / "none").string());
    EXPECT_EQ(absent.l1d, fallback.l1d);
    EXPECT_EQ(absent.l2, fallback.l2);
    EXPECT_EQ(absent.l3, fallback.l3);
    EXPECT_EQ(absent.llc, fallback.llc);
    EXPECT_EQ(fallback.l1d, 32 << 10);
    EXPECT_EQ(fallback.l2, 1 << 20);
    EXPECT_EQ(fallback.llc, 32 << 20);
    // An L2 of 1 KiB, a garbled L1d, an L3 with a unit sysfs never writes, a broken cpu list.
    cache_entry(dir.path, 0, 1, "Data", "lots");
    cache_entry(dir.path, 1, 2, "Unified", "1K");
    cache_entry(dir.path, 2, 3, "Unified", "8X", "3-1");
    const CacheSizes bad = read_cache_sizes(dir.path.string());
    EXPECT_EQ(bad.l1d, fallback.l1d);
    EXPECT_EQ(bad.l2, fallback.l2);
    EXPECT_EQ(bad.l3, fallback.l3);
    EXPECT_EQ(bad.l3_sharing, 1);
    // Without an L3 the highest level is the last-level cache.
    TempDir two("two_levels");
    cache_entry(two.path, 0, 1, "Data", "32K");
    cache_entry(two.path, 1, 2, "Unified", "4M", "0-3");
    EXPECT_EQ(read_cache_sizes(two.path.string()).llc, 4 << 20);
}

TEST(MachineFigures, TheLoweringAndTheTrafficModelReadTheOneReader) {
    EXPECT_EQ(looptool::private_cache_bytes(), cache_sizes().l2);
    EXPECT_EQ(looptool::detail::last_level_cache_bytes(), cache_sizes().llc);
    const CacheSizes again = read_cache_sizes();
    EXPECT_EQ(again.l2, cache_sizes().l2);
    EXPECT_EQ(again.llc, cache_sizes().llc);
    const MachineFigures m = looptool::this_machine();
    EXPECT_EQ(m.l1d_bytes, cache_sizes().l1d);
    EXPECT_EQ(m.l3_bytes, cache_sizes().l3_per_core());
    EXPECT_EQ(m.cores, usable_cores());
    EXPECT_EQ(m.peak_gflops, looptool::machine_peak_gflops());
    // The peak's own ISA choice and the vector width agree.
    const std::string isa = m.vector_bits == 512 ? "avx512" : m.vector_bits == 256 ? "avx2" : "";
    if (!isa.empty()) EXPECT_EQ(looptool::measure_peak_gflops(0.01).isa, isa);
}

TEST(MachineVector, ScalesEachFigureIntoItsBounds) {
    MachineFigures m;
    m.l1d_bytes = 32 << 10;
    m.l2_bytes = 1 << 20;
    m.l3_bytes = 4 << 20;
    m.vector_bits = 512;
    m.cores = 4;
    m.peak_gflops = 127;
    const std::vector<float> v = machine_vector(m, 2);
    ASSERT_EQ(v.size(), size_t(kMachineFeatures));
    EXPECT_FLOAT_EQ(v[0], 0.3f);        // log2(32 KiB) = 15: (15 - 12) / 10
    EXPECT_FLOAT_EQ(v[1], 0.4f);        // (20 - 16) / 10
    EXPECT_FLOAT_EQ(v[2], 6.f / 12.f);  // (22 - 16) / 12
    EXPECT_FLOAT_EQ(v[3], 1.f);         // 512 bits
    EXPECT_FLOAT_EQ(v[4], 7.f / 11.f);  // log2(1 + 127) / 11
    EXPECT_FLOAT_EQ(v[5], 2.f / 8.f);   // log2(4 cores) / 8
    EXPECT_FLOAT_EQ(v[6], 0.5f);        // 2 threads on 4 cores
    EXPECT_FLOAT_EQ(v[7], 1.f / 8.f);   // log2(2 threads) / 8
    // AVX2, one thread: those entries follow.
    m.vector_bits = 256;
    EXPECT_FLOAT_EQ(machine_vector(m, 1)[3], 0.5f);
    EXPECT_FLOAT_EQ(machine_vector(m, 1)[6], 0.25f);
    EXPECT_FLOAT_EQ(machine_vector(m, 1)[7], 0.f);
    // Unknown (0) and extreme figures stay within the bounds.
    const std::vector<float> high = machine_tensor_high();
    MachineFigures unknown;
    unknown.l1d_bytes = unknown.l2_bytes = unknown.l3_bytes = 0;
    MachineFigures huge;
    huge.l1d_bytes = huge.l2_bytes = huge.l3_bytes = int64_t(1) << 40;
    huge.vector_bits = 2048;
    huge.cores = 1 << 12;
    huge.peak_gflops = 1e9;
    for (const auto &[fig, threads] :
         {std::pair{unknown, 1}, std::pair{huge, 64}, std::pair{m, 1000}}) {
        const std::vector<float> x = machine_vector(fig, threads);
        for (int i = 0; i < kMachineFeatures; ++i) {
            EXPECT_GE(x[size_t(i)], 0.f) << i;
            EXPECT_LE(x[size_t(i)], high[size_t(i)]) << i;
        }
    }
    EXPECT_EQ(machine_vector(unknown, 1)[0], 0.f);
    EXPECT_EQ(machine_vector(huge, 64)[0], 1.f);
}

// The vector is the same in the tensor observation, the flat RL state's tail and the graph's
// own features, on every state of random walks, and within the declared bounds.
TEST(MachineVector, IsInEveryObservationOnRandomWalks) {
    for (int threads : {1, 2}) {
        Environment env(unmeasured(threads));
        const std::vector<float> want = machine_vector(looptool::this_machine(), threads);
        EXPECT_EQ(env.machine_vector(), want);
        const std::vector<float> high = machine_tensor_high();
        std::mt19937_64 rng{uint64_t(threads)};
        int states = 0;
        for (const auto &p : {matmul(64, 48, 32), matmul(17, 300, 5)}) {
            env.reset(p);
            while (true) {
                const Observation o = env.observe("machine_tensor");
                ASSERT_EQ(o.shape, std::vector<int64_t>{kMachineFeatures});
                EXPECT_EQ(o.values, want);
                for (int i = 0; i < kMachineFeatures; ++i) {
                    EXPECT_GE(o.values[size_t(i)], 0.f);
                    EXPECT_LE(o.values[size_t(i)], high[size_t(i)]);
                }
                const RlState s = encode_state(env, true);
                ASSERT_EQ(int(s.flat.size()), rl_shape(env).flat_size());
                EXPECT_TRUE(std::equal(want.begin(), want.end(), s.flat.end() - kMachineFeatures));
                EXPECT_EQ(s.graph.graph_features, want);
                ++states;
                if (!any_legal(s)) break;
                std::vector<int> legal;
                for (size_t a = 0; a < s.mask.size(); ++a)
                    if (s.mask[a]) legal.push_back(int(a));
                env.step_index(legal[rng() % legal.size()]);
            }
        }
        EXPECT_GE(states, 20);
    }
    // The threads used are what differ between the two environments.
    const std::vector<float> one = Environment(unmeasured(1)).machine_vector();
    const std::vector<float> two = Environment(unmeasured(2)).machine_vector();
    EXPECT_TRUE(std::equal(one.begin(), one.begin() + 6, two.begin()));
    EXPECT_LT(one[7], two[7]);
}
