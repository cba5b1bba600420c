// Measurement protocol and the MAX_GFLOPS roof. Nothing here asserts a speed: only that the
// protocol's counts, flags and bounds hold (speed figures live in benchmarks/).
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"

namespace looptool {
namespace {

// C = A + B over 64x64 in the Buffers layout of make_elementwise_add (A, B, C).
void add_kernel(float *const *buf, const volatile int32_t *cancel) {
    for (int i = 0; i < 64 * 64; ++i) buf[2][i] = buf[0][i] + buf[1][i];
}

// Never finishes on its own: returns only when the cancel flag is raised.
void spin_until_cancelled(float *const *, const volatile int32_t *cancel) {
    while (*cancel == 0) {}
}

// Runs about 20 ms per call, honouring the cancel flag like a JIT kernel.
void slow_kernel(float *const *, const volatile int32_t *cancel) {
    auto t0 = std::chrono::steady_clock::now();
    while (*cancel == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20)) {}
}

struct EnvVar {
    std::string name;
    std::string old;
    bool had;
    EnvVar(std::string n, const char *value) : name(std::move(n)) {
        const char *o = std::getenv(name.c_str());
        had = o != nullptr;
        if (had) old = o;
        if (value)
            setenv(name.c_str(), value, 1);
        else
            unsetenv(name.c_str());
    }
    ~EnvVar() {
        if (had)
            setenv(name.c_str(), old.c_str(), 1);
        else
            unsetenv(name.c_str());
    }
};

TEST(Measure, TrivialKernelMeetsTheProtocol) {
    Computation c = make_elementwise_add(64, 64);
    Buffers b = make_buffers(c, 3);
    MeasureOptions o;
    o.min_runs = 25;
    o.min_time_s = 0.01;
    Measurement m = measure_kernel(add_kernel, c, b, o);
    EXPECT_FALSE(m.timed_out);
    EXPECT_GE(m.runs, o.min_runs);
    EXPECT_LE(m.runs, o.max_runs);
    EXPECT_GE(m.cv, 0.0);
    EXPECT_GT(m.median_s, 0.0);
    EXPECT_LE(m.min_s, m.median_s);
    EXPECT_GE(m.max_gflops, m.median_gflops);
    EXPECT_NEAR(m.median_gflops, c.flops() / m.median_s * 1e-9, 1e-9 * m.median_gflops);
    // The kernel really ran on the buffers.
    EXPECT_FLOAT_EQ(b.data[2][17], b.data[0][17] + b.data[1][17]);
}

TEST(Measure, MaxRunsCapsTheCount) {
    Computation c = make_elementwise_add(64, 64);
    Buffers b = make_buffers(c, 3);
    MeasureOptions o;
    o.min_runs = 5;
    o.max_runs = 7;
    o.min_time_s = 10.0;  // never reached: max_runs stops first
    Measurement m = measure_kernel(add_kernel, c, b, o);
    EXPECT_EQ(m.runs, 7);
    EXPECT_FALSE(m.timed_out);
}

TEST(Measure, SpinningKernelIsCancelledAtTheCap) {
    Computation c = make_elementwise_add(64, 64);
    Buffers b = make_buffers(c, 3);
    MeasureOptions o;
    o.time_cap_s = 0.2;
    auto t0 = std::chrono::steady_clock::now();
    Measurement m = measure_kernel(spin_until_cancelled, c, b, o);
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(m.timed_out);
    EXPECT_EQ(m.runs, 0);
    EXPECT_GE(elapsed, 0.2);
    EXPECT_LT(elapsed, 0.2 + 1.5);  // generous slack for a loaded machine
    // No call completed: the time is a lower bound (at least the cap).
    EXPECT_GE(m.median_s, 0.2);
    EXPECT_GT(m.median_gflops, 0.0);
}

TEST(Measure, SlowKernelStopsWithinTheCapAndKeepsCompletedCalls) {
    Computation c = make_elementwise_add(64, 64);
    Buffers b = make_buffers(c, 3);
    MeasureOptions o;
    o.warmup = 1;
    o.min_runs = 1000;  // 20 s worth: the cap must end it
    o.time_cap_s = 0.3;
    auto t0 = std::chrono::steady_clock::now();
    Measurement m = measure_kernel(slow_kernel, c, b, o);
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(m.timed_out);
    EXPECT_GE(m.runs, 1);
    EXPECT_LT(m.runs, 1000);
    EXPECT_LT(elapsed, 0.3 + 1.5);
    EXPECT_GE(m.min_s, 0.019);
}

// A kernel whose call does not fit the cap (a 20 ms call under a 5 ms cap: the cut figure
// would claim 4x its speed) is measured again with calls that fit; a kernel that never ends
// is an error, not a figure. measure_kernel_uncut is what the side-by-side references use.
TEST(Measure, UncutMeasuresACallLongerThanTheCapInFull) {
    Computation c = make_elementwise_add(64, 64);
    Buffers b = make_buffers(c, 3);
    MeasureOptions o;
    o.time_cap_s = 0.005;
    EXPECT_TRUE(measure_kernel(slow_kernel, c, b, o).timed_out);
    Measurement m = measure_kernel_uncut(slow_kernel, c, b, o);
    EXPECT_FALSE(m.timed_out);
    EXPECT_EQ(m.runs, 3);
    EXPECT_GE(m.min_s, 0.019);
    EXPECT_LT(m.median_s, 0.2);
}

// A search caps the first call at a few calls of its best kernel: a 20 ms kernel under a 5 ms
// first-call cap is cut after that call, whatever the total cap; a fast kernel measures in
// full, past the first-call cap (which applies to the first call only).
TEST(Measure, TheFirstCallCapCutsASlowKernelAfterOneCall) {
    Computation c = make_elementwise_add(64, 64);
    Buffers b = make_buffers(c, 3);
    MeasureOptions o;
    o.warmup = 1;
    o.min_runs = 3;
    o.time_cap_s = 1.0;
    o.first_call_cap_s = 0.005;
    auto t0 = std::chrono::steady_clock::now();
    Measurement m = measure_kernel(slow_kernel, c, b, o);
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(m.timed_out);
    EXPECT_EQ(m.runs, 0);
    EXPECT_GE(m.median_s, 0.005);     // a lower bound on its time: at least the cap
    EXPECT_LT(elapsed, 0.015 + 0.5);  // not the 4 calls (80 ms) of the protocol; slack for load
    o.first_call_cap_s = 0;           // without it, all of them
    m = measure_kernel(slow_kernel, c, b, o);
    EXPECT_FALSE(m.timed_out);
    EXPECT_EQ(m.runs, 3);

    o = {};
    o.min_time_s = 0.05;  // ten times the first-call cap
    o.first_call_cap_s = 0.005;
    m = measure_kernel(add_kernel, c, b, o);
    EXPECT_FALSE(m.timed_out) << m.runs << " runs, median " << m.median_s;
    EXPECT_GE(m.runs, o.min_runs);
    o.first_call_cap_s = -1;
    EXPECT_THROW(measure_kernel(add_kernel, c, b, o), Error);
}

TEST(Measure, BadOptionsAreErrors) {
    Computation c = make_elementwise_add(8, 8);
    Buffers b = make_buffers(c, 3);
    MeasureOptions o;
    o.min_runs = 0;
    EXPECT_THROW(measure_kernel(add_kernel, c, b, o), Error);
    o = {};
    o.time_cap_s = 0;
    EXPECT_THROW(measure_kernel(add_kernel, c, b, o), Error);
    EXPECT_THROW(measure_kernel(nullptr, c, b), Error);
    Buffers wrong = make_buffers(make_elementwise_add(4, 4), 3);
    EXPECT_THROW(measure_kernel(add_kernel, c, wrong), Error);
}

TEST(Measure, CallerAffinityIsRestored) {
    cpu_set_t before, after;
    ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
    Computation c = make_elementwise_add(64, 64);
    Buffers b = make_buffers(c, 3);
    MeasureOptions o;
    o.min_time_s = 0.001;
    measure_kernel(add_kernel, c, b, o);
    ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after));
}

TEST(Measure, PinToCoreUsesAnAllowedCore) {
    cpu_set_t saved;
    ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
    int core = pin_to_core();
    ASSERT_GE(core, 0);
    EXPECT_TRUE(CPU_ISSET(core, &saved));
    cpu_set_t now;
    ASSERT_EQ(sched_getaffinity(0, sizeof(now), &now), 0);
    EXPECT_EQ(CPU_COUNT(&now), 1);
    EXPECT_TRUE(CPU_ISSET(core, &now));
    sched_setaffinity(0, sizeof(saved), &saved);
}

// The neighbour copies on its core until destroyed; a core nobody can pin to is an error.
TEST(Measure, ACacheNeighbourCopiesOnItsCoreUntilDestroyed) {
    {
        CacheNeighbour n(0);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (n.copies() == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        EXPECT_GT(n.copies(), 0);
    }  // joined here: the test would hang otherwise
    EXPECT_THROW(CacheNeighbour(-1), Error);
    EXPECT_THROW(CacheNeighbour(100000), Error);
    EXPECT_THROW(CacheNeighbour(0, 0), Error);  // the core measured on
}

TEST(Peak, IsPositiveAndNamesAnIsa) {
    PeakResult r = measure_peak_gflops(0.05);
    EXPECT_GT(r.gflops, 0.0);
    EXPECT_TRUE(r.isa == "avx512" || r.isa == "avx2" || r.isa == "sse") << r.isa;
    EXPECT_THROW(measure_peak_gflops(0), Error);
}

TEST(Peak, MaxGflopsEnvOverrideIsHonoured) {
    EnvVar v("MAX_GFLOPS", "123.5");
    EXPECT_DOUBLE_EQ(max_gflops(), 123.5);
    EnvVar bad("MAX_GFLOPS", "fast");
    EXPECT_THROW(max_gflops(), Error);
    EnvVar neg("MAX_GFLOPS", "-4");
    EXPECT_THROW(max_gflops(), Error);
}

TEST(Peak, StoredPeakIsWrittenAndReadBack) {
    auto dir = std::filesystem::temp_directory_path() /
               ("looptune_peak_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    EnvVar env("MAX_GFLOPS", nullptr);
    {
        EnvVar cache("XDG_CACHE_HOME", (dir / "a").c_str());
        std::string path = store_peak({77.25, "avx2"});
        EXPECT_EQ(path, (dir / "a" / "looptune" / "peak.json").string());
        std::string text = read_file(path);
        EXPECT_NE(text.find(cpu_model_name()), std::string::npos) << text;
        EXPECT_DOUBLE_EQ(max_gflops(), 77.25);
        // The environment variable still wins over the stored value.
        EnvVar over("MAX_GFLOPS", "300");
        EXPECT_DOUBLE_EQ(max_gflops(), 300.0);
    }
    {
        // A file written by another process (not through store_peak) is read, by CPU model.
        EnvVar cache("XDG_CACHE_HOME", (dir / "b").c_str());
        std::filesystem::create_directories(dir / "b" / "looptune");
        write_file_atomically((dir / "b" / "looptune" / "peak.json").string(),
                              "{\"machines\": {\"" + cpu_model_name() + "\": {\"gflops\": 55.5}}}");
        EXPECT_DOUBLE_EQ(max_gflops(), 55.5);
    }
    {
        // A malformed file is an error naming it, never a silent zero.
        EnvVar cache("XDG_CACHE_HOME", (dir / "c").c_str());
        std::filesystem::create_directories(dir / "c" / "looptune");
        write_file_atomically((dir / "c" / "looptune" / "peak.json").string(), "{not json");
        try {
            max_gflops();
            ADD_FAILURE() << "no error for a malformed peak file";
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find("peak.json"), std::string::npos) << e.what();
        }
    }
    std::filesystem::remove_all(dir);
}

// A cache file that is JSON but not the cache's shape is someone else's: refused, naming it,
// before any measurement, and never overwritten.
TEST(Peak, AForeignCacheFileIsRefusedBeforeMeasuringAndKept) {
    auto dir = std::filesystem::temp_directory_path() /
               ("looptune_peak_foreign_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    EnvVar env("MAX_GFLOPS", nullptr);
    const std::string contents[] = {"[1, 2]\n", "\"fast\"\n", "{\"machines\": []}\n",
                                    "{\"machines\": {\"" + cpu_model_name() + "\": \"fast\"}}\n"};
    int i = 0;
    for (const std::string &text : contents) {
        const auto home = dir / std::to_string(i++);
        EnvVar cache("XDG_CACHE_HOME", home.c_str());
        const auto file = home / "looptune" / "peak.json";
        std::filesystem::create_directories(file.parent_path());
        write_file_atomically(file.string(), text);
        try {
            max_gflops();
            ADD_FAILURE() << "no error for " << text;
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
        }
        if (text.find("machines") == std::string::npos || text.find("[]") != std::string::npos)
            EXPECT_THROW(store_peak({50, "avx2"}), Error) << text;
        EXPECT_EQ(read_file(file.string()), text);
    }
    std::filesystem::remove_all(dir);
}

// A cache that cannot be written (here: its directory would sit under a regular file, which
// stops root too) costs a re-measurement next time, never this run's answer.
TEST(Peak, AnUnwritableCacheIsAWarningAndThePeakIsStillMeasured) {
    auto file = std::filesystem::temp_directory_path() /
                ("looptune_peak_blocked_" + std::to_string(::getpid()));
    write_file_atomically(file.string(), "a file, not a directory\n");
    EnvVar env("MAX_GFLOPS", nullptr);
    EnvVar cache("XDG_CACHE_HOME", (file / "cache").c_str());
    EXPECT_THROW(store_peak({50, "avx2"}), Error);
    double peak = 0;
    EXPECT_NO_THROW(peak = max_gflops());
    EXPECT_GT(peak, 0.0);
    std::filesystem::remove(file);
}

TEST(Peak, CliMeasuresAndStores) {
    auto dir = std::filesystem::temp_directory_path() /
               ("looptune_peak_cli_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::string cmd = "env -u MAX_GFLOPS XDG_CACHE_HOME='" + dir.string() +
                      "' '" LOOPTOOL_CLI "' peak --json --seconds 0.05 2>&1";
    FILE *f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string out;
    char buf[256];
    while (size_t n = fread(buf, 1, sizeof(buf), f)) out.append(buf, n);
    EXPECT_EQ(pclose(f), 0) << out;
    EXPECT_NE(out.find("\"gflops\""), std::string::npos) << out;
    EXPECT_NE(out.find("\"isa\""), std::string::npos) << out;
    const auto stored = dir / "looptune" / "peak.json";
    ASSERT_TRUE(std::filesystem::exists(stored)) << out;
    EXPECT_NE(read_file(stored.string()).find(cpu_model_name()), std::string::npos);
    // Bad input is rejected with an error, not measured.
    f = popen(("'" LOOPTOOL_CLI "' peak --seconds -1 2>&1"), "r");
    ASSERT_NE(f, nullptr);
    while (fread(buf, 1, sizeof(buf), f)) {}
    EXPECT_NE(pclose(f), 0);
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace looptool
