// RAII around SQLite for the measurement store (measurement_store.cpp only): a prepared
// statement, a connection, a write transaction.
#pragma once

#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "looptool/ir/error.h"

namespace looptune::store_sqlite {

using looptool::Error;

// Long enough to ride out another process's merge of a large store.
constexpr int kBusyTimeoutMs = 60000;

/// A prepared statement, finalized on destruction. Reset before each use, so a cached
/// statement never holds a read transaction open between calls.
class Stmt {
public:
    Stmt() = default;
    Stmt(sqlite3 *db, const std::string &sql, const std::string &path) : path_(path) {
        if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) !=
            SQLITE_OK)
            throw Error(fmt::format("{}: cannot prepare '{}': {}", path, sql, sqlite3_errmsg(db)));
    }
    Stmt(Stmt &&o) noexcept : s_(o.s_), path_(std::move(o.path_)) { o.s_ = nullptr; }
    Stmt &operator=(Stmt &&o) noexcept {
        std::swap(s_, o.s_);
        std::swap(path_, o.path_);
        return *this;
    }
    ~Stmt() { sqlite3_finalize(s_); }

    Stmt &reset() {
        sqlite3_reset(s_);
        sqlite3_clear_bindings(s_);
        return *this;
    }
    Stmt &bind(int i, const std::string &v) {
        check(sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT));
        return *this;
    }
    Stmt &bind(int i, double v) {
        check(sqlite3_bind_double(s_, i, v));
        return *this;
    }
    Stmt &bind(int i, int64_t v) {
        check(sqlite3_bind_int64(s_, i, v));
        return *this;
    }
    /// true while a row is available.
    bool step() {
        int rc = sqlite3_step(s_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        check(rc);
        return false;
    }
    void run() {
        while (step()) {}
        sqlite3_reset(s_);
    }
    std::string text(int c) const {
        auto *p = reinterpret_cast<const char *>(sqlite3_column_text(s_, c));
        return p ? std::string(p, size_t(sqlite3_column_bytes(s_, c))) : std::string();
    }
    double real(int c) const { return sqlite3_column_double(s_, c); }
    int64_t integer(int c) const { return sqlite3_column_int64(s_, c); }
    bool is_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }

private:
    void check(int rc) {
        if (rc == SQLITE_OK) return;
        sqlite3 *db = sqlite3_db_handle(s_);
        std::string msg = sqlite3_errmsg(db);
        sqlite3_reset(s_);
        throw Error(fmt::format("{}: SQLite error {}: {}", path_, rc, msg));
    }
    sqlite3_stmt *s_ = nullptr;
    std::string path_;
};

/// One connection, closed on destruction.
struct Connection {
    sqlite3 *db = nullptr;
    std::string path;

    Connection(const std::string &p, int flags) : path(p) {
        int rc = sqlite3_open_v2(p.c_str(), &db, flags, nullptr);
        if (rc != SQLITE_OK) {
            std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
            sqlite3_close(db);
            throw Error(fmt::format("{}: cannot open measurement store: {}", p, msg));
        }
        sqlite3_extended_result_codes(db, 1);
        sqlite3_busy_timeout(db, kBusyTimeoutMs);
    }
    ~Connection() { sqlite3_close(db); }  // statements are finalized first (member order)
    Connection(const Connection &) = delete;
    Connection &operator=(const Connection &) = delete;

    /// Runs SQL without results; throws Error naming the path, with `what` as context.
    void exec(const std::string &sql, const char *what = nullptr) {
        char *err = nullptr;
        if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
            std::string msg = err ? err : sqlite3_errmsg(db);
            sqlite3_free(err);
            throw Error(fmt::format("{}: {}: {}", path, what ? what : sql, msg));
        }
    }
};

/// BEGIN IMMEDIATE ... COMMIT, rolled back if the scope is left by an exception. IMMEDIATE
/// takes the write lock up front: a deferred transaction that upgrades from read to write can
/// fail with SQLITE_BUSY at once in WAL mode, without waiting for the busy timeout.
class WriteTransaction {
public:
    explicit WriteTransaction(Connection &c) : c_(c) {
        c_.exec("BEGIN IMMEDIATE", "begin transaction");
    }
    void commit() {
        c_.exec("COMMIT", "commit");
        done_ = true;
    }
    ~WriteTransaction() {
        if (!done_) sqlite3_exec(c_.db, "ROLLBACK", nullptr, nullptr, nullptr);
    }

private:
    Connection &c_;
    bool done_ = false;
};

}  // namespace looptune::store_sqlite
