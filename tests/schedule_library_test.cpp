// The schedule library: entries kept per (computation, machine) in the store's file, and
// `tune` answering from it: the second run of a shape is a lookup of the first's verified
// schedule, --retune searches again, and a foreign or damaged file is refused.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include "env/store/measurement_store.h"
#include "env/store/schedule_library.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "test_util.h"
#include "tune/schedule_library_use.h"

using namespace looptool;
using looptune::LibraryEntry;
using looptune::ScheduleLibrary;

namespace {

LibraryEntry entry_for(const Program &start, const Program &tuned, double gflops) {
    LibraryEntry e;
    e.machine = "test-cpu|peak=1|code=1";
    e.computation = looptune::computation_key(*start.comp);
    e.name = start.comp->name;
    looptune::describe_shape(*start.comp, e);
    e.program = serialize(tuned);
    e.actions = {"split_8"};
    e.gflops = gflops;
    e.start_gflops = 1;
    e.verified = true;
    e.version = "test";
    return e;
}

TEST(ScheduleLibrary, KeysAComputationByItsStatementsNotItsName) {
    const Computation a = make_matmul(24, 32, 48), b = make_matmul(24, 32, 48, "mine");
    EXPECT_EQ(looptune::computation_key(a), looptune::computation_key(b));
    EXPECT_NE(looptune::computation_key(a), looptune::computation_key(make_matmul(24, 32, 40)));
    EXPECT_NE(looptune::computation_key(a),
              looptune::computation_key(make_elementwise_add(24, 32)));
}

TEST(ScheduleLibrary, DescribesMatmulAndConvShapesForDispatch) {
    LibraryEntry e;
    looptune::describe_shape(make_matmul(24, 32, 48), e);
    EXPECT_EQ(e.kind, "matmul");
    EXPECT_EQ(e.shape, (std::vector<int64_t>{24, 32, 48}));
    looptune::describe_shape(make_conv2d(2, 3, 10, 12, 4, 3, 5), e);
    EXPECT_EQ(e.kind, "conv2d");
    EXPECT_EQ(e.shape, (std::vector<int64_t>{2, 3, 10, 12, 4, 3, 5}));
    looptune::describe_shape(make_padded_conv2d(2, 3, 10, 12, 4, 3, 3, 2, 1), e);
    EXPECT_EQ(e.kind, "conv2d");
    EXPECT_EQ(e.shape, (std::vector<int64_t>{2, 3, 10, 12, 4, 3, 3, 2, 1}));
    looptune::describe_shape(make_strided_conv2d(2, 3, 10, 12, 4, 3, 3, 2), e);
    EXPECT_EQ(e.shape, (std::vector<int64_t>{2, 3, 10, 12, 4, 3, 3, 2, 0}));
    looptune::describe_shape(make_elementwise_add(24, 32), e);
    EXPECT_EQ(e.kind, "");
    EXPECT_TRUE(e.shape.empty());
}

TEST(ScheduleLibrary, PutFindAndListRoundTrip) {
    tests::TempDir dir("library");
    const Program start = tests::matmul_program(24, 32, 48);
    const Program tuned = apply(start, Action::Split8);
    auto lib = ScheduleLibrary::open(dir / "store.sqlite");
    LibraryEntry e = entry_for(start, tuned, 10);
    EXPECT_FALSE(lib->find(e.machine, e.computation));
    lib->put(e);
    const auto got = lib->find(e.machine, e.computation);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->program, e.program);
    EXPECT_EQ(got->actions, e.actions);
    EXPECT_EQ(got->shape, e.shape);
    EXPECT_GT(got->timestamp, 0);
    EXPECT_FALSE(lib->find("another|peak=2|code=1", e.computation));
    EXPECT_EQ(lib->entries(e.machine).size(), 1u);
    EXPECT_EQ(lib->machines(), std::vector<std::string>{e.machine});
    // The measurement store still opens the file, and the library read-only sees the entry.
    EXPECT_NO_THROW(looptune::MeasurementStore::open(dir / "store.sqlite"));
    EXPECT_EQ(ScheduleLibrary::open_read_only(dir / "store.sqlite")->entries(e.machine).size(), 1u);
}

TEST(ScheduleLibrary, KeepsTheFasterVerifiedScheduleAndNeverAnUnverifiedOne) {
    tests::TempDir dir("library");
    const Program start = tests::matmul_program(24, 32, 48);
    auto lib = ScheduleLibrary::open(dir / "store.sqlite");
    LibraryEntry fast = entry_for(start, apply(start, Action::Split8), 20);
    EXPECT_EQ(looptune::file_result(*lib, fast), looptune::Filed::Added);
    LibraryEntry slow = entry_for(start, apply(start, Action::Split4), 10);
    EXPECT_EQ(looptune::file_result(*lib, slow), looptune::Filed::KeptFaster);
    LibraryEntry wrong = entry_for(start, apply(start, Action::Split2), 30);
    wrong.verified = false;
    EXPECT_EQ(looptune::file_result(*lib, wrong), looptune::Filed::NotVerified);
    EXPECT_EQ(lib->find(fast.machine, fast.computation)->program, fast.program);
    LibraryEntry faster = entry_for(start, apply(start, Action::Split4), 25);
    EXPECT_EQ(looptune::file_result(*lib, faster), looptune::Filed::Replaced);
}

TEST(ScheduleLibrary, AnswersWithTheStoredLoopsOverTheCallersComputation) {
    tests::TempDir dir("library");
    const Program start = tests::matmul_program(24, 32, 48);
    const Program tuned = apply(apply(start, Action::Split8), Action::Down);
    auto lib = ScheduleLibrary::open(dir / "store.sqlite");
    lib->put(entry_for(start, tuned, 10));
    auto renamed = std::make_shared<const Computation>(make_matmul(24, 32, 48, "mine"));
    const auto a =
        looptune::library_answer(*lib, "test-cpu|peak=1|code=1", Program::naive(renamed));
    ASSERT_TRUE(a);
    EXPECT_EQ(a->program.comp->name, "mine");
    EXPECT_EQ(schedule_key(Program{start.comp, a->program.tree, 0}), schedule_key(tuned));
    auto jit = Jit::create();
    EXPECT_TRUE(tests::matches_reference(*jit, a->program));
}

TEST(ScheduleLibrary, SkipsRowsAForeignWriterDamaged) {
    tests::TempDir dir("library");
    const Program start = tests::matmul_program(24, 32, 48);
    auto lib = ScheduleLibrary::open(dir / "store.sqlite");
    lib->put(entry_for(start, apply(start, Action::Split8), 10));
    sqlite3 *db = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "store.sqlite").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(
        sqlite3_exec(db, "UPDATE schedule_library SET gflops = 'fast'", nullptr, nullptr, nullptr),
        SQLITE_OK);
    sqlite3_close(db);
    EXPECT_TRUE(lib->entries("test-cpu|peak=1|code=1").empty());
    EXPECT_FALSE(lib->find("test-cpu|peak=1|code=1", looptune::computation_key(*start.comp)));
}

TEST(ScheduleLibrary, RefusesAForeignFileUntouched) {
    tests::TempDir dir("library");
    tests::write(dir, "notes.txt", "not a database at all, just text\n");
    EXPECT_THROW(ScheduleLibrary::open(dir / "notes.txt"), Error);
    EXPECT_EQ(tests::slurp(dir.path / "notes.txt"), "not a database at all, just text\n");
}

TEST(ScheduleLibrary, DefaultPathFollowsTheEnvironment) {
    const char *old = std::getenv("LOOPTUNE_LIBRARY");
    const std::string saved = old ? old : "";
    setenv("LOOPTUNE_LIBRARY", "off", 1);
    EXPECT_EQ(ScheduleLibrary::default_path(), "");
    setenv("LOOPTUNE_LIBRARY", "/tmp/x.sqlite", 1);
    EXPECT_EQ(ScheduleLibrary::default_path(), "/tmp/x.sqlite");
    EXPECT_EQ(ScheduleLibrary::default_path("given.sqlite"), "/tmp/x.sqlite");
    unsetenv("LOOPTUNE_LIBRARY");
    EXPECT_EQ(ScheduleLibrary::default_path("given.sqlite"), "given.sqlite");
    if (old)
        setenv("LOOPTUNE_LIBRARY", saved.c_str(), 1);
    else
        unsetenv("LOOPTUNE_LIBRARY");
}

// The user's cache that cannot hold a library: tune goes on without one, saying why; a library
// the user named that cannot be opened is an error.
TEST(ScheduleLibrary, AnUnusableDefaultLibraryIsAWarningANamedOneAnError) {
    tests::TempDir dir("library");
    tests::write(dir, "file", "not a folder\n");
    const char *old_lib = std::getenv("LOOPTUNE_LIBRARY"), *old_xdg = std::getenv("XDG_CACHE_HOME");
    const std::string saved_lib = old_lib ? old_lib : "", saved_xdg = old_xdg ? old_xdg : "";
    unsetenv("LOOPTUNE_LIBRARY");
    setenv("XDG_CACHE_HOME", (dir / "file").c_str(), 1);  // under a file: no folder there
    std::string warning;
    EXPECT_EQ(looptune::open_tune_library("", "", &warning), nullptr);
    EXPECT_NE(warning.find("no schedule library"), std::string::npos) << warning;
    EXPECT_THROW(looptune::open_tune_library(dir / "file/lib.sqlite", "", &warning), Error);
    if (old_lib) setenv("LOOPTUNE_LIBRARY", saved_lib.c_str(), 1);
    if (old_xdg)
        setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
    else
        unsetenv("XDG_CACHE_HOME");
}

// tune --matmul twice on one library: the first searches and files a verified schedule, the
// second answers with it (no policy loaded), --retune searches again.
TEST(ScheduleLibrary, TuneAnswersASecondRunFromTheLibrary) {
    tests::TempDir dir("library");
    const std::string args = "tune --matmul 24,32,48 --budget-s 0.1 --json --library lib.sqlite";
    const tests::RunResult first = tests::run_cli(dir, args);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const auto j1 = nlohmann::json::parse(first.out);
    EXPECT_FALSE(j1["from_library"].get<bool>());
    EXPECT_EQ(j1["library"]["filed"], "added") << first.out;
    const tests::RunResult second = tests::run_cli(dir, args);
    ASSERT_EQ(second.exit_code, 0) << second.err;
    const auto j2 = nlohmann::json::parse(second.out);
    EXPECT_TRUE(j2["from_library"].get<bool>());
    EXPECT_TRUE(j2["verified"].get<bool>());
    EXPECT_EQ(j2["best_actions"], j1["best_actions"]);
    EXPECT_EQ(j2["program"], j1["program"]);
    auto jit = Jit::create();
    EXPECT_TRUE(tests::matches_reference(*jit, parse_program(j2["program"].get<std::string>())));
    const tests::RunResult again = tests::run_cli(dir, args + " --retune");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_FALSE(nlohmann::json::parse(again.out)["from_library"].get<bool>());
    const tests::RunResult off =
        tests::run_cli(dir, "tune --matmul 8,8,8 --budget-s 0.05 --library off");
    EXPECT_EQ(off.exit_code, 0) << off.err;
    EXPECT_EQ(off.out.find("schedule library"), std::string::npos) << off.out;
}

}  // namespace
