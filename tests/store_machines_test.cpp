// The store's machines table (env/store/measurement_store.h): figures kept per fingerprint,
// merged with the rows, read back for a store of another machine; an environment acting as
// another machine of the store (EnvConfig::machine) and the demonstrations replayed as each
// machine (rl/demonstrations.h) take that machine's rows and machine vector, with two fake
// fingerprints beside this machine's.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <map>

#include "env/environment.h"
#include "env/observations.h"
#include "env/rl_state.h"
#include "env/store/measurement_store.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "rl/demonstrations.h"
#include "rl/replay.h"
#include "rl/trainer.h"
#include "search/trace.h"
#include "test_util.h"

using namespace looptune;
using looptool::Action;
using looptool::Program;
using looptool::tests::TempDir;

namespace {

const std::string kMachineA = "Fake CPU A|peak=50|code=1";
const std::string kMachineB = "Fake CPU B|peak=300|code=1";

MachineFigures figures(int64_t l2, int bits, double peak) {
    MachineFigures m;
    m.l1d_bytes = 32 << 10;
    m.l2_bytes = l2;
    m.l3_bytes = 2 << 20;
    m.vector_bits = bits;
    m.cores = 8;
    m.peak_gflops = peak;
    return m;
}

bool same(const MachineFigures &a, const MachineFigures &b) {
    return a.l1d_bytes == b.l1d_bytes && a.l2_bytes == b.l2_bytes && a.l3_bytes == b.l3_bytes &&
           a.vector_bits == b.vector_bits && a.cores == b.cores && a.peak_gflops == b.peak_gflops;
}

EnvConfig lookup_only(const std::string &store, const std::string &machine) {
    EnvConfig c;
    c.store_path = store;
    c.machine = machine;
    c.action_space = "full";  // TrainConfig's default
    c.threads = 1;
    c.max_steps = 8;
    c.max_gflops = 100;  // the roof: no peak measurement needed for the reward
    return c;
}

// The programs a trace of `actions` passes through from the naive nest of `bench`.
std::vector<Program> trace_programs(const std::string &bench, const std::vector<Action> &actions) {
    std::vector<Program> out{Program::naive(looptool::load_program_file(bench).comp)};
    for (Action a : actions) out.push_back(looptool::apply(out.back(), a));
    return out;
}

void put(MeasurementStore &s, const Program &p, const std::string &machine, double gflops) {
    s.put(p.comp->name, looptool::schedule_key(p), machine, {gflops, 5, 0.01});
}

}  // namespace

TEST(StoreMachines, FiguresAreKeptPerMachineAndMerged) {
    TempDir dir("store_machines");
    EXPECT_EQ(base_fingerprint(kMachineA + "|threads=4"), kMachineA);
    EXPECT_EQ(fingerprint_threads(kMachineA + "|threads=4"), 4);
    EXPECT_EQ(fingerprint_threads(kMachineA), 1);
    const MachineFigures a = figures(1 << 20, 256, 50), b = figures(2 << 20, 512, 300);
    {
        auto sa = MeasurementStore::open(dir / "a.sqlite");
        sa->put_machine(kMachineA + "|threads=2", a);  // kept under the machine itself
        sa->put("bench", "sched", kMachineA, {10, 5, 0.01});
        EXPECT_FALSE(sa->machine(kMachineB));
        EXPECT_THROW(sa->put_machine(kMachineA, figures(0, 256, 50)), looptool::Error);
        auto sb = MeasurementStore::open(dir / "b.sqlite");
        sb->put_machine(kMachineB, b);
        sb->put("bench", "sched", kMachineB, {20, 5, 0.01});
        sb->put_machine(kMachineA, figures(4 << 20, 128, 1));  // a different view of A
    }
    auto c = MeasurementStore::open(dir / "c.sqlite");
    EXPECT_EQ(c->merge_from(dir / "a.sqlite"), 1);
    EXPECT_EQ(c->merge_from(dir / "b.sqlite"), 1);
    ASSERT_TRUE(c->machine(kMachineA));
    ASSERT_TRUE(c->machine(kMachineB + "|threads=8"));
    EXPECT_TRUE(same(*c->machine(kMachineA), a));  // the first merged is kept
    EXPECT_TRUE(same(*c->machine(kMachineB), b));
    EXPECT_EQ(c->stats().machines, 2);
    // The CLI's merge carries the figures too.
    auto r = looptool::tests::run_cli(dir, "store merge --store d.sqlite b.sqlite a.sqlite");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto d = MeasurementStore::open_read_only(dir / "d.sqlite");
    ASSERT_TRUE(d->machine(kMachineA) && d->machine(kMachineB));
    EXPECT_TRUE(same(*d->machine(kMachineA), figures(4 << 20, 128, 1)));
}

// A store written before the machines table reads as having no figures, and gains the table
// (and the writer's figures) once opened to write.
TEST(StoreMachines, AStoreWithoutTheTableHasNoFigures) {
    TempDir dir("store_old");
    const std::string path = dir / "old.sqlite";
    MeasurementStore::open(path)->put("bench", "sched", kMachineA, {10, 5, 0.01});
    sqlite3 *db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TABLE machines", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    EXPECT_FALSE(MeasurementStore::open_read_only(path)->machine(kMachineA));
    auto other = MeasurementStore::open(dir / "new.sqlite");
    EXPECT_EQ(other->merge_from(path), 1);  // rows merge without figures
    EXPECT_FALSE(other->machine(kMachineA));
    auto reopened = MeasurementStore::open(path);
    reopened->put_machine(kMachineA, figures(1 << 20, 256, 50));
    EXPECT_TRUE(reopened->machine(kMachineA));
}

// An environment acting as machine A or B of a merged store: its GFLOPS from that machine's
// rows, its vector from that machine's figures; what the store lacks is an error, not a
// measurement on this machine.
TEST(StoreMachines, AnEnvironmentActsAsAnotherMachineOfTheStore) {
    TempDir dir("store_foreign");
    looptool::write_matmul_dataset({{16, 16, 16}}, (dir.path / "ds").string());
    const std::string bench = dir / "ds/mm16_16_16";
    const std::string store = dir / "s.sqlite";
    const std::vector<Program> ps = trace_programs(bench, {Action::Split2});
    const MachineFigures a = figures(1 << 20, 256, 50), b = figures(2 << 20, 512, 300);
    {
        auto s = MeasurementStore::open(store);
        s->put_machine(kMachineA, a);
        s->put_machine(kMachineB, b);
        put(*s, ps[0], kMachineA, 5);
        put(*s, ps[0], kMachineB, 40);
        put(*s, ps[1], kMachineB, 60);
    }
    Environment ea(lookup_only(store, kMachineA)), eb(lookup_only(store, kMachineB));
    EXPECT_EQ(ea.machine_vector(), machine_vector(a, 1));
    EXPECT_EQ(eb.machine_vector(), machine_vector(b, 1));
    EXPECT_NE(ea.machine_vector(), eb.machine_vector());
    ea.reset(bench);
    eb.reset(bench);
    EXPECT_EQ(ea.gflops(), 5);
    EXPECT_EQ(eb.gflops(), 40);
    const RlState sa = encode_state(ea, false);
    const std::vector<float> va = machine_vector(a, 1);
    EXPECT_TRUE(std::equal(va.begin(), va.end(), sa.flat.end() - kMachineFeatures));
    EXPECT_EQ(eb.step(Action::Split2).info.gflops, 60);
    EXPECT_THROW(ea.step(Action::Split2), looptool::Error);  // A has no row of it
    EXPECT_THROW(Environment(lookup_only(store, "Fake CPU C|peak=1|code=1")), looptool::Error);
    EXPECT_THROW(Environment(lookup_only("", kMachineA)), looptool::Error);
}

// Demonstrations replayed as each other machine of the store: every state carries that
// machine's vector, and a trace stops where the machine's rows stop.
TEST(StoreMachines, DemonstrationsTakeEachRowsMachine) {
    TempDir dir("store_demos");
    looptool::write_matmul_dataset({{16, 16, 16}}, (dir.path / "ds").string());
    const std::string bench = dir / "ds/mm16_16_16";
    const std::string store = dir / "s.sqlite";
    const std::vector<Action> actions = {Action::Down, Action::Down, Action::Vectorize};
    append_traces(dir / "traces.csv", {{bench, "test", 4, 1, actions}});
    const std::vector<Program> ps = trace_programs(bench, actions);
    const MachineFigures a = figures(1 << 20, 256, 50), b = figures(2 << 20, 512, 300);
    {
        auto s = MeasurementStore::open(store);
        s->put_machine(kMachineA, a);
        s->put_machine(kMachineB, b);
        for (size_t i = 0; i < ps.size(); ++i) put(*s, ps[i], kMachineA, 1.0 + double(i));
        put(*s, ps[0], kMachineB, 10);  // B: the naive nest only
    }
    TrainConfig config;
    config.warmstart = dir / "traces.csv";
    config.warmstart_min_speedup = 1;
    EnvConfig here = lookup_only(store, "");
    here.measure.min_time_s = 0.001;
    Environment env(here);
    PrioritizedReplay replay(100, 0.6, 1);
    const std::vector<Demo> demos = load_other_machines_demonstrations(config, env, replay);
    std::map<std::vector<float>, int> steps;
    for (const Demo &d : demos)
        ++steps[std::vector<float>(d.state.flat.end() - kMachineFeatures, d.state.flat.end())];
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_EQ(steps[machine_vector(a, 1)], 3);  // the whole trace
    // B: the two cursor moves (which need no row); its vectorized schedule is absent.
    EXPECT_EQ(steps[machine_vector(b, 1)], 2);
    EXPECT_GT(replay.size(), 0);
}
