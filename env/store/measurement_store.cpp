#include "env/store/measurement_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "env/store/store_impl.h"
#include "looptool/ir/error.h"
#include "looptool/lower/lower.h"

namespace looptune {

namespace {

using looptool::Error;
using store_sqlite::Connection;
using store_sqlite::kBusyTimeoutMs;
using store_sqlite::Stmt;
using store_sqlite::WriteTransaction;

constexpr const char *kFormatName = "looptune-measurement-store";

/// A non-empty file that does not start with SQLite's magic string is rejected before SQLite
/// sees it, for a clearer message than "file is not a database".
// No raw open() of the database file here: closing any descriptor of a SQLite file drops
// every POSIX lock this process holds on it, so another process could then checkpoint and
// delete the WAL under a live connection (it did: a training run's store was corrupted when
// a search process sharing it exited). Foreign files are recognised through SQLite instead.
void check_not_directory(const std::string &path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw Error(fmt::format("{}: is a directory, not a measurement store", path));
}

// What a valid row holds (docs/store.md): SQLite keeps whatever a foreign writer put in a
// column (text in a REAL column, -inf), so every reader filters on this.
constexpr const char *kValidRow =
    "(typeof(median_gflops) IN ('real', 'integer') AND median_gflops >= 0 AND median_gflops < "
    "1e308 "
    "AND typeof(cv) IN ('real', 'integer') AND cv >= 0 AND cv < 1e308 "
    "AND typeof(runs) = 'integer' AND runs >= 0 AND typeof(timestamp) = 'integer' AND timestamp >= "
    "0 "
    "AND typeof(benchmark) = 'text' AND benchmark <> '' AND typeof(schedule) = 'text' "
    "AND schedule <> '' AND typeof(machine) = 'text' AND machine <> '')";

// The first read of a file: a foreign or damaged file fails here, with a message saying which.
void first_read(Connection &c, const char *sql) {
    if (sqlite3_exec(c.db, sql, nullptr, nullptr, nullptr) == SQLITE_OK) return;
    if (sqlite3_errcode(c.db) == SQLITE_NOTADB)
        throw Error(
            fmt::format("{}: not a SQLite database, so not a looptune measurement store", c.path));
    throw Error(fmt::format("{}: cannot read as a SQLite database (corrupt?): {}", c.path,
                            sqlite3_errmsg(c.db)));
}

// Checks that the tables of `c` are a looptune store of a version this code reads.
// Returns false for a database without tables (which open() initialises).
bool check_store_meta(Connection &c) {
    const std::string &path = c.path;
    int64_t tables = 0;
    bool has_meta = false, has_measurements = false;
    {
        Stmt s(c.db, "SELECT name FROM sqlite_master WHERE type='table'", path);
        while (s.step()) {
            ++tables;
            if (s.text(0) == "looptune_meta") has_meta = true;
            if (s.text(0) == "measurements") has_measurements = true;
        }
    }
    if (tables == 0) return false;
    if (!has_meta)
        throw Error(fmt::format(
            "{}: a SQLite database but not a looptune measurement store (no looptune_meta table)",
            path));
    // A view (or anything else) under that name would pass every query and hold nothing.
    if (!has_measurements)
        throw Error(fmt::format(
            "{}: not a looptune measurement store: 'measurements' is not a table", path));
    std::string format, version;
    {
        Stmt s(c.db, "SELECT key, value FROM looptune_meta", path);
        while (s.step()) {
            if (s.text(0) == "format") format = s.text(1);
            if (s.text(0) == "schema_version") version = s.text(1);
        }
    }
    if (format != kFormatName)
        throw Error(
            fmt::format("{}: not a looptune measurement store (format '{}')", path, format));
    int v = std::atoi(version.c_str());
    if (v < 1 || v > MeasurementStore::kSchemaVersion)
        throw Error(
            fmt::format("{}: measurement store schema version '{}' is not supported "
                        "(this looptool reads 1 to {})",
                        path, version, MeasurementStore::kSchemaVersion));
    return true;
}

// The first access to a file: its tables read in a read transaction, so a foreign or damaged
// file is refused before anything writes to it (a journal-mode switch persists in the file).
// Returns false for a database without tables.
bool read_store_meta(Connection &c) {
    first_read(c, "SELECT count(*) FROM sqlite_master");
    c.exec("BEGIN", "begin read transaction");
    bool has_tables = false;
    try {
        has_tables = check_store_meta(c);
    } catch (...) {
        sqlite3_exec(c.db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
    c.exec("COMMIT", "end read transaction");
    return has_tables;
}

int64_t now_unix() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

std::string machine_fingerprint(double peak_gflops) {
    std::string model;
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) != 0) continue;
        auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        model = line.substr(colon + 1);
        break;
    }
    auto first = model.find_first_not_of(" \t");
    auto last = model.find_last_not_of(" \t");
    model = first == std::string::npos ? "unknown-cpu" : model.substr(first, last - first + 1);
    // Whole GFLOPS: the peak comes from the cached peak.json, so it is the same every run
    // on one machine, and the key stays readable.
    // The kernel code's version too: a schedule's figure is its kernel's.
    return fmt::format("{}|peak={}|code={}", model, std::llround(peak_gflops),
                       looptool::kKernelCodeVersion);
}

MeasurementStore::MeasurementStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MeasurementStore::~MeasurementStore() = default;

const std::string &MeasurementStore::path() const { return impl_->conn.path; }

std::unique_ptr<MeasurementStore> MeasurementStore::open(const std::string &path, bool create) {
    if (!create && !std::filesystem::exists(path))
        throw Error(fmt::format("{}: no such measurement store", path));
    check_not_directory(path);
    auto impl = std::make_unique<Impl>(
        path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0));
    Connection &c = impl->conn;

    read_store_meta(c);  // a foreign file fails here, untouched
    // WAL must be set outside a transaction; it persists.
    // SQLite can answer SQLITE_BUSY here without waiting in the busy handler (seen about once in
    // ten when several MPI ranks created one new store at once), so wait for it ourselves.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
    int wal_rc;
    while ((wal_rc = sqlite3_exec(c.db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr)) !=
               SQLITE_OK &&
           (wal_rc & 0xff) == SQLITE_BUSY && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (wal_rc != SQLITE_OK) {
        const int rc = sqlite3_errcode(c.db);
        if (rc == SQLITE_NOTADB)
            throw Error(fmt::format(
                "{}: not a SQLite database, so not a looptune measurement store", path));
        throw Error(fmt::format("{}: cannot read as a SQLite database (corrupt?): {}", path,
                                sqlite3_errmsg(c.db)));
    }
    // FULL: a committed transaction survives a power loss, not just a process crash. A
    // measurement takes milliseconds, an fsync far less.
    c.exec("PRAGMA synchronous=FULL", "set synchronous");

    {
        // Inspect and, if empty, create the schema under the write lock, so two processes
        // creating the same new store do not both initialise it.
        WriteTransaction tx(c);
        if (!check_store_meta(c))
            c.exec(fmt::format(R"(
                CREATE TABLE looptune_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                INSERT INTO looptune_meta VALUES ('format', '{}'), ('schema_version', '{}'),
                                                 ('created', '{}');
                CREATE TABLE measurements (
                    benchmark     TEXT    NOT NULL,
                    schedule      TEXT    NOT NULL,
                    machine       TEXT    NOT NULL,
                    median_gflops REAL    NOT NULL,
                    runs          INTEGER NOT NULL,
                    cv            REAL    NOT NULL,
                    timestamp     INTEGER NOT NULL,
                    PRIMARY KEY (benchmark, schedule, machine));
                )",
                               kFormatName, kSchemaVersion, now_unix()),
                   "create schema");
        create_machines_table(c);
        tx.commit();
    }

    prepare_lookup(*impl);
    impl->put = Stmt(c.db,
                     "INSERT INTO measurements VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                     "ON CONFLICT (benchmark, schedule, machine) DO UPDATE SET "
                     "median_gflops = excluded.median_gflops, runs = excluded.runs, "
                     "cv = excluded.cv, timestamp = excluded.timestamp",
                     path);
    return std::unique_ptr<MeasurementStore>(new MeasurementStore(std::move(impl)));
}

void MeasurementStore::prepare_lookup(Impl &impl) {
    impl.lookup = Stmt(impl.conn.db,
                       fmt::format("SELECT median_gflops, runs, cv, timestamp FROM measurements "
                                   "WHERE benchmark = ?1 AND schedule = ?2 AND machine = ?3 AND {}",
                                   kValidRow),
                       impl.conn.path);
}

std::unique_ptr<MeasurementStore> MeasurementStore::open_read_only(const std::string &path) {
    if (!std::filesystem::exists(path))
        throw Error(fmt::format("{}: no such measurement store", path));
    check_not_directory(path);
    // No journal-mode or synchronous pragma: both would write to the file.
    auto impl = std::make_unique<Impl>(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
    Connection &c = impl->conn;
    if (!read_store_meta(c))
        throw Error(
            fmt::format("{}: an empty SQLite database, not a looptune measurement store", path));
    prepare_lookup(*impl);
    return std::unique_ptr<MeasurementStore>(new MeasurementStore(std::move(impl)));
}

std::optional<StoredMeasurement> MeasurementStore::lookup(const std::string &benchmark,
                                                          const std::string &schedule,
                                                          const std::string &machine) {
    std::lock_guard lock(impl_->mu);
    Stmt &s = impl_->lookup.reset().bind(1, benchmark).bind(2, schedule).bind(3, machine);
    std::optional<StoredMeasurement> out;
    if (s.step())
        out = StoredMeasurement{.median_gflops = s.real(0),
                                .runs = int(s.integer(1)),
                                .cv = s.real(2),
                                .timestamp = s.integer(3)};
    s.reset();  // ends the implicit read transaction
    return out;
}

void MeasurementStore::put(const std::string &benchmark, const std::string &schedule,
                           const std::string &machine, const StoredMeasurement &m) {
    if (!std::isfinite(m.median_gflops) || !std::isfinite(m.cv) || m.runs < 0)
        throw Error(
            fmt::format("{}: refusing to store a bad measurement ({} GFLOPS, {} runs, cv {})",
                        path(), m.median_gflops, m.runs, m.cv));
    if (impl_->read_only) throw Error(fmt::format("{}: opened read-only", path()));
    std::lock_guard lock(impl_->mu);
    WriteTransaction tx(impl_->conn);
    impl_->put.reset()
        .bind(1, benchmark)
        .bind(2, schedule)
        .bind(3, machine)
        .bind(4, m.median_gflops)
        .bind(5, int64_t(m.runs))
        .bind(6, m.cv)
        .bind(7, m.timestamp ? m.timestamp : now_unix())
        .run();
    tx.commit();
}

std::vector<MeasurementStore::Row> MeasurementStore::rows(const std::string &machine) {
    std::lock_guard lock(impl_->mu);
    Connection &c = impl_->conn;
    Stmt s(c.db,
           fmt::format("SELECT benchmark, schedule, median_gflops FROM measurements WHERE "
                       "machine = ?1 AND {} ORDER BY rowid",
                       kValidRow),
           c.path);
    s.bind(1, machine);
    std::vector<Row> out;
    while (s.step()) out.push_back({s.text(0), s.text(1), s.real(2)});
    return out;
}

MeasurementStore::Stats MeasurementStore::stats() {
    std::lock_guard lock(impl_->mu);
    Connection &c = impl_->conn;
    Stats st;
    st.path = c.path;
    // One read transaction, so the figures are one consistent snapshot.
    c.exec("BEGIN", "begin read transaction");
    try {
        {
            Stmt s(c.db, "SELECT value FROM looptune_meta WHERE key = 'schema_version'", c.path);
            if (s.step()) st.schema_version = std::atoi(s.text(0).c_str());
        }
        {
            Stmt s(c.db, fmt::format("SELECT COUNT(*) FROM measurements WHERE NOT {}", kValidRow),
                   c.path);
            if (s.step()) st.invalid = s.integer(0);
        }
        {
            Stmt s(
                c.db,
                fmt::format("SELECT COUNT(*), COUNT(DISTINCT benchmark), COUNT(DISTINCT machine), "
                            "MAX(median_gflops) FROM measurements WHERE {}",
                            kValidRow),
                c.path);
            if (s.step()) {
                st.measurements = s.integer(0);
                st.benchmarks = s.integer(1);
                st.machines = s.integer(2);
                st.best_gflops = s.is_null(3) ? 0 : s.real(3);
            }
        }
        {
            Stmt s(c.db,
                   fmt::format("SELECT benchmark FROM measurements WHERE {} ORDER BY median_gflops "
                               "DESC LIMIT 1",
                               kValidRow),
                   c.path);
            if (s.step()) st.best_benchmark = s.text(0);
        }
        {
            Stmt s(c.db,
                   fmt::format(
                       "SELECT machine, COUNT(*), COUNT(DISTINCT benchmark), MAX(median_gflops) "
                       "FROM measurements WHERE {} GROUP BY machine ORDER BY machine",
                       kValidRow),
                   c.path);
            while (s.step())
                st.per_machine.push_back({.machine = s.text(0),
                                          .measurements = s.integer(1),
                                          .benchmarks = s.integer(2),
                                          .best_gflops = s.real(3)});
        }
    } catch (...) {
        sqlite3_exec(c.db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
    c.exec("COMMIT", "end read transaction");
    return st;
}

std::vector<std::string> MeasurementStore::check() {
    std::lock_guard lock(impl_->mu);
    std::vector<std::string> problems;
    try {
        Stmt s(impl_->conn.db, "PRAGMA integrity_check", path());
        while (s.step())
            if (s.text(0) != "ok") problems.push_back(s.text(0));
    } catch (const looptool::Error &e) {
        problems.push_back(e.what());  // damage bad enough to stop the check itself
    }
    if (!problems.empty()) return problems;
    // The values: one count per column and rule, so the report says what is wrong where.
    struct Rule {
        const char *column, *valid, *what;
    };
    static const Rule rules[] = {
        {"median_gflops",
         "typeof(median_gflops) IN ('real', 'integer') AND median_gflops >= 0 AND median_gflops < "
         "1e308",
         "not a finite number >= 0"},
        {"cv", "typeof(cv) IN ('real', 'integer') AND cv >= 0 AND cv < 1e308",
         "not a finite number >= 0"},
        {"runs", "typeof(runs) = 'integer' AND runs >= 0", "not an integer >= 0"},
        {"timestamp", "typeof(timestamp) = 'integer' AND timestamp >= 0", "not an integer >= 0"},
        {"benchmark", "typeof(benchmark) = 'text' AND benchmark <> ''", "not a non-empty text"},
        {"schedule", "typeof(schedule) = 'text' AND schedule <> ''", "not a non-empty text"},
        {"machine", "typeof(machine) = 'text' AND machine <> ''", "not a non-empty text"},
    };
    try {
        for (const Rule &r : rules) {
            Stmt s(impl_->conn.db,
                   fmt::format("SELECT COUNT(*), group_concat(DISTINCT typeof({0})), "
                               "(SELECT quote({0}) FROM measurements WHERE NOT ({1}) LIMIT 1) "
                               "FROM measurements WHERE NOT ({1})",
                               r.column, r.valid),
                   path());
            if (s.step() && s.integer(0) > 0)
                problems.push_back(fmt::format("{} row(s) with {} {} (types: {}; e.g. {})",
                                               s.integer(0), r.column, r.what, s.text(1),
                                               s.text(2)));
        }
    } catch (const looptool::Error &e) {
        problems.push_back(e.what());
    }
    return problems;
}

int64_t MeasurementStore::merge_from(const std::string &other_path, int64_t *skipped) {
    if (impl_->read_only) throw Error(fmt::format("{}: opened read-only", path()));
    std::error_code ec;
    if (std::filesystem::equivalent(other_path, path(), ec))
        throw Error(fmt::format("{}: cannot merge a measurement store into itself", other_path));
    auto other = MeasurementStore::open_read_only(other_path);

    std::lock_guard lock(impl_->mu);
    std::lock_guard other_lock(other->impl_->mu);
    Connection &src = other->impl_->conn;
    // Read the source in one snapshot while writing the destination in one transaction: a
    // crash leaves the destination as it was, and a concurrent writer to the source does not
    // tear the copy.
    src.exec("BEGIN", "begin read transaction");
    int64_t added = 0;
    try {
        WriteTransaction tx(impl_->conn);
        if (skipped) {
            Stmt bad(src.db,
                     fmt::format("SELECT COUNT(*) FROM measurements WHERE NOT {}", kValidRow),
                     src.path);
            *skipped = bad.step() ? bad.integer(0) : 0;
        }
        Stmt read(
            src.db,
            fmt::format("SELECT benchmark, schedule, machine, median_gflops, runs, cv, timestamp "
                        "FROM measurements WHERE {}",
                        kValidRow),
            src.path);
        Stmt write(impl_->conn.db,
                   "INSERT INTO measurements VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                   "ON CONFLICT DO NOTHING",
                   path());
        while (read.step()) {
            write.reset()
                .bind(1, read.text(0))
                .bind(2, read.text(1))
                .bind(3, read.text(2))
                .bind(4, read.real(3))
                .bind(5, read.integer(4))
                .bind(6, read.real(5))
                .bind(7, read.integer(6))
                .run();
            added += sqlite3_changes(impl_->conn.db);
        }
        copy_machines(src, impl_->conn);
        tx.commit();
    } catch (...) {
        sqlite3_exec(src.db, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
    src.exec("COMMIT", "end read transaction");
    return added;
}

}  // namespace looptune

namespace looptune {

void MeasurementStore::snapshot_to(const std::string &dest_path) {
    if (std::filesystem::exists(dest_path))
        throw Error(fmt::format("{}: already exists; a snapshot goes to a new file", dest_path));
    std::lock_guard lock(impl_->mu);
    // VACUUM INTO reads one consistent snapshot (WAL included) and writes a compact copy.
    Stmt vacuum(impl_->conn.db, "VACUUM INTO ?1", path());
    vacuum.bind(1, dest_path).run();
}

}  // namespace looptune
