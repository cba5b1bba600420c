// Ape-X across MPI ranks: the message formats (rl/mpi/mpi_transport.h), and `looptool train
// --distributed mpi` under mpirun on tiny matmuls: a run and its resume, a killed actor rank
// and a hung one. The mpirun tests are skipped when the build has no MPI (LOOPTUNE_MPIEXEC).
#include "rl/mpi/mpi_transport.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <regex>
#include <thread>

#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptune;
using looptool::tests::slurp;
using looptool::tests::TempDir;
namespace fs = std::filesystem;

namespace {

RlState state(float marker, bool with_graph) {
    RlState s;
    s.flat = {marker, marker + 1, -marker};
    s.mask = {1, 0, 1, 1};
    if (with_graph) {
        s.graph.num_vertices = 3;
        s.graph.features = {1, 2, 3, 4, 5, 6};
        s.graph.edges = {{0, 1}, {1, 2}};
    }
    return s;
}

void expect_same(const RlState &a, const RlState &b) {
    EXPECT_EQ(a.flat, b.flat);
    EXPECT_EQ(a.mask, b.mask);
    EXPECT_EQ(a.graph.num_vertices, b.graph.num_vertices);
    EXPECT_EQ(a.graph.features, b.graph.features);
    EXPECT_EQ(a.graph.edges, b.graph.edges);
}

}  // namespace

TEST(MpiTransport, TransitionsRoundTripWithGraphsAndPriorities) {
    std::vector<Transition> ts(2);
    ts[0] = {state(1, true), 3, 0.5f, 0.97f, state(2, true)};
    ts[1] = {state(4, false), 0, -1.25f, 0.0f, state(5, false)};
    const std::vector<char> bytes = encode_transitions(ts, {0.25f, 7.0f});
    std::vector<Transition> back;
    std::vector<float> priorities;
    decode_transitions(bytes, &back, &priorities);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(priorities, (std::vector<float>{0.25f, 7.0f}));
    for (size_t i = 0; i < 2; ++i) {
        expect_same(back[i].state, ts[i].state);
        expect_same(back[i].next, ts[i].next);
        EXPECT_EQ(back[i].action, ts[i].action);
        EXPECT_EQ(back[i].reward, ts[i].reward);
        EXPECT_EQ(back[i].discount, ts[i].discount);
    }
    decode_transitions(encode_transitions({}, {}), &back, &priorities);
    EXPECT_TRUE(back.empty());
}

TEST(MpiTransport, StatusWeightsGrantsAndText) {
    ActorStatus s{12, 2, {0.5f, -0.25f}, {1.5f, 2.0f}};
    ActorStatus b = decode_status(encode_status(s));
    EXPECT_EQ(b.env_steps, 12);
    EXPECT_EQ(b.episodes, 2);
    EXPECT_EQ(b.episode_rewards, s.episode_rewards);
    EXPECT_EQ(b.episode_speedups, s.episode_speedups);
    int64_t version = 0;
    EXPECT_EQ(decode_weights(encode_weights(41, {1, 2, 3}), &version),
              (std::vector<float>{1, 2, 3}));
    EXPECT_EQ(version, 41);
    EXPECT_EQ(decode_grant(encode_grant(1234567890123)), 1234567890123);
    EXPECT_EQ(decode_text(encode_text("actor 3: boom")), "actor 3: boom");
    EXPECT_EQ(decode_text(encode_text("")), "");
}

TEST(MpiTransport, ErrorsKeepTheirClassAsText) {
    auto round_trip = [](std::exception_ptr e) {
        // What crosses ranks is text, and a "rank R: " may be put in front on the way.
        return looptune::error_from_text("rank 2: " + looptune::error_text(e));
    };
    std::exception_ptr user = round_trip(std::make_exception_ptr(looptool::Error("bad dataset")));
    std::exception_ptr bug =
        round_trip(std::make_exception_ptr(looptool::InternalError("broken invariant")));
    try {
        std::rethrow_exception(user);
    } catch (const looptool::Error &e) {
        EXPECT_STREQ(e.what(), "rank 2: bad dataset");
    }
    try {
        std::rethrow_exception(bug);
    } catch (const looptool::InternalError &e) {
        EXPECT_STREQ(e.what(), "rank 2: broken invariant");
    }
    EXPECT_THROW(std::rethrow_exception(bug), looptool::InternalError);
    EXPECT_THROW(std::rethrow_exception(user), looptool::Error);
}

TEST(MpiTransport, TruncatedOrMislabelledBuffersAreErrors) {
    std::vector<char> bytes = encode_transitions({{state(1, true), 1, 1, 1, state(2, true)}}, {1});
    for (size_t cut : {size_t{0}, size_t{3}, size_t{12}, bytes.size() / 2, bytes.size() - 1}) {
        std::vector<char> part(bytes.begin(), bytes.begin() + cut);
        std::vector<Transition> ts;
        std::vector<float> p;
        EXPECT_THROW(decode_transitions(part, &ts, &p), looptool::Error) << cut;
    }
    bytes.push_back(0);
    std::vector<Transition> ts;
    std::vector<float> p;
    EXPECT_THROW(decode_transitions(bytes, &ts, &p), looptool::Error);
    EXPECT_THROW(decode_status(encode_grant(3)), looptool::Error);
    int64_t version = 0;
    EXPECT_THROW(decode_weights(encode_text("x"), &version), looptool::Error);
    // A length field far beyond the buffer.
    std::vector<char> weights = encode_weights(1, {1, 2});
    weights[4 + 8 + 7] = 0x7f;
    EXPECT_THROW(decode_weights(weights, &version), looptool::Error);
}

#ifdef LOOPTOOL_CLI

namespace {

#ifdef LOOPTUNE_MPIEXEC
const std::string kMpiexec = LOOPTUNE_MPIEXEC;
#else
const std::string kMpiexec;  // built without MPI
#endif
const std::string kMpirun = kMpiexec + " --oversubscribe --allow-run-as-root --bind-to none";
// When a rank dies, mpirun SIGTERMs the others and SIGKILLs them 1 s later by default: too
// little for rank 0 to write its checkpoint when the tests share 2 cores (docs/distributed.md).
const std::string kPatientMpirun = kMpirun + " --mca odls_base_sigkill_timeout 5";

/// The tiny settings of tests/rl_test.cpp's tiny_training, as train options.
const std::string kSettings =
    "--threads 1 --distributed mpi --actors 1 --episode-steps 6 --hidden 32 --gnn-hidden 16 "
    "--batch 16 "
    "--learning-starts 32 "
    "--replay 1000 --eval-benchmarks 2 --no-plots";
const std::string kTiny = "train --dataset data --trainer apex " + kSettings;

bool have_mpirun() { return !kMpiexec.empty() && fs::exists(kMpiexec); }
const char *kNoMpirun = "built without MPI, or its mpiexec is gone";

/// Runs `sh -c command` in `dir`; stdout and stderr go to dir/NAME.out and dir/NAME.err.
pid_t spawn(const TempDir &dir, const std::string &name, const std::string &command) {
    const std::string line = "cd '" + dir.path.string() + "' && exec " + command + " >" + name +
                             ".out 2>" + name + ".err </dev/null";
    const char *argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
    pid_t pid = -1;
    EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char **>(argv), environ),
              0);
    return pid;
}

/// The exit status of `pid` (-1 if killed by a signal), or nullopt when it runs past `seconds`.
std::optional<int> wait_exit(pid_t pid, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
}

struct JobResult {
    int exit_code = -1;
    std::string out, err;
};

JobResult run(const TempDir &dir, const std::string &command, double seconds = 120) {
    pid_t pid = spawn(dir, "run", command);
    std::optional<int> code = wait_exit(pid, seconds);
    if (!code) {
        kill(pid, SIGTERM);  // mpirun ends its ranks
        wait_exit(pid, 10);
        ADD_FAILURE() << command << " ran past " << seconds << " s";
    }
    return {code.value_or(-1), slurp(dir.path / "run.out"), slurp(dir.path / "run.err")};
}

/// The process of MPI rank `rank` among the children of `mpirun` (OMPI_COMM_WORLD_RANK in its
/// environment); -1 when there is none yet.
pid_t rank_process(pid_t mpirun, int rank) {
    for (const auto &entry : fs::directory_iterator("/proc")) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const std::string stat = slurp(entry.path() / "stat");
        const size_t paren = stat.rfind(')');
        if (paren == std::string::npos) continue;
        int ppid = 0;
        char state = 0;
        if (std::sscanf(stat.c_str() + paren + 1, " %c %d", &state, &ppid) != 2 || ppid != mpirun)
            continue;
        std::string env = slurp(entry.path() / "environ");
        std::replace(env.begin(), env.end(), '\0', '\n');
        if (("\n" + env).find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") !=
            std::string::npos)
            return std::stoi(name);
    }
    return -1;
}

/// env_steps of the last row of a metrics.csv.
int64_t last_row_steps(const std::string &csv) {
    std::smatch m;
    std::string last;
    for (size_t at = 0, end; (end = csv.find('\n', at)) != std::string::npos; at = end + 1)
        if (end > at) last = csv.substr(at, end - at);
    if (!std::regex_search(last, m, std::regex("^[0-9.]+,(\\d+),"))) return -1;
    return std::stoll(m[1]);
}

std::string tiny_dataset(const TempDir &dir) {
    auto r = looptool::tests::run_cli(
        dir, "generate --dimA 16:32:16,16:32:16 --dimB 16:32:16,16:48:16 --out data");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return dir / "data";
}

/// Starts a long run, waits for its first checkpoint, then hits actor rank 2 with `signal`; returns
/// the run's stderr once mpirun has ended (and the checkpoint step the resume must start from).
JobResult interrupt_actor_rank(const TempDir &dir, int signal, const std::string &extra,
                               const std::string &mpirun_command = kMpirun) {
    pid_t mpirun = spawn(dir, "long",
                         mpirun_command + " -np 3 " LOOPTOOL_CLI " " + kTiny +
                             " --out run --steps 1000000 --max-seconds 60 --checkpoint-every 100"
                             " --eval-every 0 " +
                             extra);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(dir.path / "run/checkpoint.pt") && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const pid_t victim = rank_process(mpirun, 2);
    EXPECT_GT(victim, 0);
    if (victim > 0) kill(victim, signal);
    std::optional<int> code = wait_exit(mpirun, 60);
    if (!code) {
        kill(mpirun, SIGTERM);
        wait_exit(mpirun, 10);
    }
    if (victim > 0 && kill(victim, 0) == 0) {  // a stopped rank that mpirun could not end
        kill(victim, SIGKILL);
        kill(victim, SIGCONT);
    }
    EXPECT_TRUE(code.has_value()) << "mpirun did not end after rank 2 got signal " << signal;
    return {code.value_or(-1), slurp(dir.path / "long.out"), slurp(dir.path / "long.err")};
}

/// --resume continues from the checkpoint an interrupted run left.
void expect_resumes(const TempDir &dir) {
    JobResult r =
        run(dir, kMpirun + " -np 3 " LOOPTOOL_CLI " " + kTiny +
                     " --out run --resume --steps 1000000 --max-seconds 2 --eval-every 0 --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(r.err, m, std::regex("resumed from run/checkpoint.pt at step (\\d+)")))
        << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["resumed"].get<bool>());
    EXPECT_GT(j["env_steps"].get<int64_t>(), std::stoll(m[1]));
}

}  // namespace

TEST(MpiTraining, ThreeRanksTrainExactlyTheStepsAndResume) {
    if (!have_mpirun()) GTEST_SKIP() << kNoMpirun;
    TempDir dir("mpi");
    tiny_dataset(dir);
    const std::string train =
        kMpirun + " -np 3 " LOOPTOOL_CLI " " + kTiny +
        " --encoder gnn --out run --checkpoint-every 100 --eval-every 120 --json";
    JobResult r = run(dir, train + " --steps 240");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Only rank 0 reports: stdout is one JSON object.
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["env_steps"], 240);
    EXPECT_GT(j["episodes"].get<int>(), 0);
    EXPECT_GT(j["updates"].get<int>(), 0);
    EXPECT_GT(j["eval_speedup"].get<double>(), 0);
    EXPECT_FALSE(j["resumed"].get<bool>());
    EXPECT_NE(r.err.find("MPI: rank 0 learns, 2 ranks x 1 actors act"), std::string::npos) << r.err;
    EXPECT_TRUE(std::regex_search(
        r.err, std::regex("checkpoint at step \\d+ \\(\\d+ updates\\): run/checkpoint.pt")))
        << r.err;
    // The learner never runs ahead of the replay ratio (0.5 by default).
    EXPECT_LE(j["updates"].get<int>(), 0.5 * 240);
    for (const char *f : {"checkpoint.pt", "trained.policy", "metrics.csv", "store.sqlite"})
        EXPECT_TRUE(fs::exists(dir.path / "run" / f)) << f;
    const std::string metrics = slurp(dir.path / "run/metrics.csv");
    EXPECT_EQ(metrics.rfind("seconds,env_steps,episodes,updates,", 0), 0u);
    EXPECT_EQ(last_row_steps(metrics), 240) << metrics;

    // A fresh start in the same directory is refused (by rank 0, once); --resume continues.
    r = run(dir, train + " --steps 240");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("pass --resume"), std::string::npos) << r.err;
    r = run(dir, train + " --steps 360 --resume");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json k = nlohmann::json::parse(r.out);
    EXPECT_TRUE(k["resumed"].get<bool>());
    EXPECT_EQ(k["env_steps"], 360);
    EXPECT_GE(k["updates"].get<int>(), j["updates"].get<int>());
    EXPECT_NE(r.err.find("resumed from run/checkpoint.pt at step 240"), std::string::npos) << r.err;
    EXPECT_EQ(last_row_steps(slurp(dir.path / "run/metrics.csv")), 360);
}

TEST(MpiTraining, WithoutMpirunOrWithDqnOrWithoutMpiItIsAClearError) {
    TempDir dir("mpi1");
    tiny_dataset(dir);
    auto r = looptool::tests::run_cli(dir, kTiny + " --out run --steps 10");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(kMpiexec.empty() ? "this looptool was built without MPI"
                                          : "needs at least 2 MPI processes"),
              std::string::npos)
        << r.err;
    r = looptool::tests::run_cli(
        dir, "train --dataset data --trainer dqn " + kSettings + " --out run --steps 10");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--distributed mpi needs --trainer apex"), std::string::npos) << r.err;
}

TEST(MpiTraining, AKilledActorRankEndsTheJobWithAnIntactCheckpoint) {
    if (!have_mpirun()) GTEST_SKIP() << kNoMpirun;
    TempDir dir("mpikill");
    tiny_dataset(dir);
    // mpirun notices the death and ends the job with SIGTERM; rank 0 saves and says how to resume.
    JobResult r = interrupt_actor_rank(dir, SIGKILL, "", kPatientMpirun);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("rerun the same command with --resume"), std::string::npos) << r.err;
    expect_resumes(dir);
}

TEST(MpiTraining, AHungActorRankTimesOutWithAnIntactCheckpoint) {
    if (!have_mpirun()) GTEST_SKIP() << kNoMpirun;
    TempDir dir("mpihang");
    tiny_dataset(dir);
    // A stopped process looks alive to mpirun: rank 0's heartbeat timeout ends the job.
    JobResult r = interrupt_actor_rank(dir, SIGSTOP, "--mpi-timeout 3");
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(std::regex_search(r.err, std::regex("rank 2 has been silent for \\d+ s"))) << r.err;
    EXPECT_NE(r.err.find("rerun the same command with --resume"), std::string::npos) << r.err;
    expect_resumes(dir);
}

TEST(MpiTraining, NodeLocalStoresAreMergedIntoTheRunDirectory) {
    if (!have_mpirun()) GTEST_SKIP() << kNoMpirun;
    TempDir dir("mpistores");
    tiny_dataset(dir);
    // Two "hosts" on one machine: rank 0 on host0, ranks 1 and 2 on host1; "%h" in --store gives
    // each host its own file, as a node-local path would on a cluster.
    const std::string as_two_hosts =
        kMpirun +
        " -np 3 sh -c 'LOOPTUNE_HOST_NAME=host$((OMPI_COMM_WORLD_RANK > 0)) exec " LOOPTOOL_CLI
        " \"$@\"' sh ";
    JobResult r = run(dir, as_two_hosts + kTiny + " --out run --steps 120 --eval-every 60 --json");
    EXPECT_NE(r.exit_code, 0);  // one store for two hosts cannot work
    EXPECT_NE(r.err.find("needs --store with a node-local path"), std::string::npos) << r.err;

    r = run(dir, as_two_hosts + kTiny +
                     " --out run --steps 120 --eval-every 60 --store node_%h.sqlite --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("stores of 2 hosts merged into run/store.sqlite"), std::string::npos)
        << r.err;
    auto count = [&](const std::string &store) {
        auto s = looptool::tests::run_cli(dir, "store stats --json --store " + store);
        EXPECT_EQ(s.exit_code, 0) << s.err;
        return s.exit_code == 0 ? nlohmann::json::parse(s.out)["measurements"].get<int64_t>() : -1;
    };
    // Rank 0 measured the test split (evaluation), the actors the training split: disjoint, so
    // the run's store holds exactly both.
    const int64_t host0 = count("node_host0.sqlite"), host1 = count("node_host1.sqlite");
    EXPECT_GT(host0, 0);
    EXPECT_GT(host1, 0);
    EXPECT_EQ(count("run/store.sqlite"), host0 + host1);
    auto again = looptool::tests::run_cli(
        dir, "store merge --json --store run/store.sqlite node_host0.sqlite node_host1.sqlite");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    for (const auto &m : nlohmann::json::parse(again.out)["merged"]) EXPECT_EQ(m["added"], 0) << m;
    EXPECT_FALSE(fs::exists(dir.path / "run/store.1.part"));
}

#endif
