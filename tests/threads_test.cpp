// The default thread count (util/threads.h): every core the process may use, through the
// library calls and the built `looptool`; a process confined to one core (as `taskset -c C`)
// gets 1. Runs keep the thread count in the keys they file results under. The threads policy
// chooses the parallel loop itself.
#include <gtest/gtest.h>
#include <sched.h>
#include <nlohmann/json.hpp>

#include <array>
#include <memory>
#include <string>

#include "env/environment.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/ir.h"
#include "test_util.h"
#include "tune/policy.h"
#include "tune/schedule_library_use.h"
#include "util/threads.h"

using namespace looptool;

namespace {

int affinity_count() {
    cpu_set_t set;
    EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    return CPU_COUNT(&set);
}

/// Confines the calling thread (and the processes it starts) to its first allowed core until
/// destroyed.
struct OneCore {
    cpu_set_t saved;
    OneCore() {
        sched_getaffinity(0, sizeof(saved), &saved);
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &saved)) {
                CPU_SET(c, &one);
                break;
            }
        EXPECT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
    }
    ~OneCore() { sched_setaffinity(0, sizeof(saved), &saved); }
};

/// The threads `looptool export --json` (no --threads) reports: the CLI's default.
int cli_default_threads(const tests::TempDir &dir) {
    const tests::RunResult r = tests::run_program(
        dir, LOOPTOOL_CLI, "export --bench mm.lt --actions parallel --out out --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("threads").get<int>();
}

}  // namespace

TEST(Threads, DefaultIsTheCoresTheProcessMayUse) {
    EXPECT_EQ(looptune::default_threads(), affinity_count());
    EXPECT_EQ(looptune::usable_cores(), affinity_count());
    EXPECT_EQ(looptune::resolve_threads(0), affinity_count());
    EXPECT_EQ(looptune::resolve_threads(1), 1);
    EXPECT_EQ(looptune::resolve_threads(3), 3);
    OneCore pinned;
    EXPECT_EQ(looptune::default_threads(), 1);
    EXPECT_EQ(looptune::resolve_threads(0), 1);
}

TEST(Threads, CliDefaultFollowsTheAffinityAndOneIsAsked) {
    tests::TempDir dir("threads_cli");
    tests::write(dir, "mm.lt", serialize(tests::matmul_program(24, 40, 16)));
    EXPECT_EQ(cli_default_threads(dir), affinity_count());
    {
        OneCore pinned;  // the child inherits it, as under `taskset -c C`
        EXPECT_EQ(cli_default_threads(dir), 1);
    }
    // run_cli asks for one thread where the command takes --threads.
    const tests::RunResult r =
        tests::run_cli(dir, "export --bench mm.lt --actions parallel --out one --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("threads").get<int>(), 1);
    EXPECT_EQ(tests::single_thread("lib build --out x"), "lib build --threads 1 --out x");
    EXPECT_EQ(tests::single_thread("tune --threads 2 --matmul 8,8,8"),
              "tune --threads 2 --matmul 8,8,8");
    EXPECT_EQ(tests::single_thread("store stats"), "store stats");
}

// A 2-thread schedule is never the answer to a 1-thread request: the library's machine key
// carries N above 1.
TEST(Threads, LibraryMachineKeysOnThreads) {
    EXPECT_EQ(looptune::library_machine(1).find("threads="), std::string::npos);
    EXPECT_NE(looptune::library_machine(2), looptune::library_machine(1));
    EXPECT_NE(looptune::library_machine(2).find("|threads=2"), std::string::npos);
    EXPECT_NE(looptune::library_machine(2), looptune::library_machine(3));
}

// Above one thread `tune` takes the shipped `threads` policy (it may choose `parallel` too),
// and every kernel it compiles is checked against the reference (--verify); on one thread the
// `full` one.
TEST(Threads, TuneOnTwoThreadsTakesTheThreadsPolicyAndVerifies) {
    tests::TempDir dir("threads_tune");
    for (const char *threads : {"2", "1"}) {
        SCOPED_TRACE(threads);
        // No $LOOPTUNE_POLICY nor an adapted policy of this machine's to take instead.
        const tests::RunResult r =
            tests::run_program(dir, "env",
                               "-u LOOPTUNE_POLICY XDG_CACHE_HOME='" + dir.path.string() +
                                   "' '" LOOPTOOL_CLI "' tune --threads " + threads +
                                   " --matmul 64,96,48 --budget-s 0.2 --verify --json");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        const auto j = nlohmann::json::parse(r.out);
        const std::string policy = j.at("policy");
        EXPECT_EQ(policy, looptune::shipped_policy_path(std::stoi(threads)));
        EXPECT_GE(j.at("gflops").get<double>(), j.at("base_gflops").get<double>());
        const auto meta = looptune::Policy::load(policy).info();
        EXPECT_EQ(meta.action_space, std::string(threads) == "2" ? "threads" : "full");
    }
}

namespace {

/// Whether the shipped threads policy's greedy rollout from c's naive nest marks a loop
/// parallel (and the final program keeps the mark).
bool rollout_is_parallel(const Computation &c) {
    static const looptune::Policy policy = looptune::Policy::load(looptune::shipped_policy_path(2));
    looptune::EnvConfig cfg;
    cfg.measure_enabled = false;
    cfg.threads = 2;
    looptune::Environment env(policy.env_config(cfg));
    env.reset(Program::naive(std::make_shared<Computation>(c)));
    bool parallel = false;
    while (env.steps_taken() < env.config().max_steps) {
        const int a = policy.act(env);
        if (a < 0) break;
        parallel = parallel || env.action_space().actions[size_t(a)] == Action::Parallel;
        env.step_index(a);
    }
    return parallel && dump(env.program()).find("parallel") != std::string::npos;
}

}  // namespace

// The shipped threads policy chooses the parallel loop itself: its greedy rollout alone (no
// seeds; no kernel runs, the observation holds no GFLOPS) on 2 threads marks a loop of medium
// matmuls parallel, and not of these tiny ones, where a pool's dispatch costs more than it
// shares (8x8x8 it still marks, on its write nest; tune measures what a rollout reaches).
TEST(Threads, TheThreadsPolicysGreedyRolloutParallelizesMediumMatmulsOnly) {
    for (auto [m, n, k] : {std::array<int64_t, 3>{128, 128, 128}, {256, 256, 256}, {192, 160, 224}})
        EXPECT_TRUE(rollout_is_parallel(make_matmul(m, n, k))) << m << "x" << n << "x" << k;
    for (auto [m, n, k] :
         {std::array<int64_t, 3>{16, 16, 16}, {32, 32, 32}, {12, 17, 5}, {2, 6, 28}})
        EXPECT_FALSE(rollout_is_parallel(make_matmul(m, n, k))) << m << "x" << n << "x" << k;
}

// Conv layers of one image (shapes of the training mix's grid, none of datasets/conv_layers):
// the rollout parallelizes them too, though the naive nest's outermost loop (the batch of
// one) cannot be.
TEST(Threads, TheThreadsPolicysGreedyRolloutParallelizesConvLayers) {
    for (auto [ci, h, co, k] : {std::array<int64_t, 4>{64, 30, 64, 3},
                                {32, 16, 128, 3},
                                {128, 16, 64, 1},
                                {16, 58, 32, 5}})
        EXPECT_TRUE(rollout_is_parallel(make_conv2d(1, ci, h, h, co, k, k)))
            << ci << " channels " << h << "x" << h << " -> " << co << ", " << k << "x" << k;
}
