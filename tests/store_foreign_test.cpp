// Someone else's SQLite database given as a measurement store: refused before anything writes
// to it (docs/store.md: it is not touched), by every way in (open, read-only open, the CLI's
// store merge destination); and a store whose `measurements` is not a table is not one.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "env/store/measurement_store.h"
#include "looptool/ir/error.h"
#include "test_util.h"

namespace looptune {
namespace {

namespace fs = std::filesystem;
using looptool::tests::TempDir;

// Runs `sql` on a raw connection; returns the first column of the last row it produced.
std::string raw(const std::string &path, const std::string &sql) {
    sqlite3 *db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    std::string out;
    char *err = nullptr;
    auto row = [](void *o, int, char **v, char **) {
        *static_cast<std::string *>(o) = v[0] ? v[0] : "";
        return 0;
    };
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), row, &out, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
    return out;
}

TEST(ForeignStore, IsRefusedBeforeItsJournalModeChanges) {
    TempDir dir("store_foreign");
    const std::string foreign = dir / "foreign.db";
    raw(foreign, "CREATE TABLE t (x); INSERT INTO t VALUES (1)");
    const std::string before = looptool::tests::slurp(foreign);
    try {
        MeasurementStore::open(foreign);
        ADD_FAILURE() << "a foreign database was accepted";
    } catch (const looptool::Error &e) {
        EXPECT_NE(std::string(e.what()).find("not a looptune measurement store"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(raw(foreign, "PRAGMA journal_mode"), "delete");
    EXPECT_EQ(looptool::tests::slurp(foreign), before);
    EXPECT_FALSE(fs::exists(foreign + "-wal"));

    // The same as `store merge`'s destination, with a good source.
    MeasurementStore::open(dir / "src.db")->put("b", "s", "m", {.median_gflops = 1, .runs = 1});
    auto r = looptool::tests::run_cli(dir, "store merge --store foreign.db src.db");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: foreign.db: a SQLite database but not a looptune", 0), 0u)
        << r.err;
    EXPECT_EQ(raw(foreign, "PRAGMA journal_mode"), "delete");
    EXPECT_EQ(looptool::tests::slurp(foreign), before);
}

TEST(ForeignStore, AMeasurementsViewIsNotAStore) {
    TempDir dir("store_view");
    const std::string path = dir / "view.db";
    MeasurementStore::open(path)->put("b", "s", "m", {.median_gflops = 1, .runs = 1});
    raw(path,
        "DROP TABLE measurements; CREATE VIEW measurements AS SELECT 'b' AS benchmark, 's' AS "
        "schedule, 'm' AS machine, 1.0 AS median_gflops, 1 AS runs, 0.0 AS cv, 0 AS timestamp");
    EXPECT_THROW(MeasurementStore::open_read_only(path), looptool::Error);
    auto r = looptool::tests::run_cli(dir, "store check --store view.db");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("'measurements' is not a table"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("ok"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace looptune
