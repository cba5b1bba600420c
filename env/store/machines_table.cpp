// The store's machines table: the figures of each machine its rows were measured on, so a row's
// machine vector is that machine's, whichever machine reads the store (docs/store.md).
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "env/store/store_impl.h"

namespace looptune {

using looptool::Error;
using store_sqlite::Connection;
using store_sqlite::Stmt;
using store_sqlite::WriteTransaction;

namespace {

constexpr const char *kThreadsTag = "|threads=";
constexpr const char *kColumns =
    "machine, l1d_bytes, l2_bytes, l3_bytes, vector_bits, cores, peak_gflops";

bool has_machines_table(Connection &c) {
    Stmt s(c.db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'machines'", c.path);
    const bool found = s.step();
    s.reset();
    return found;
}

// A row read back: sizes and counts positive integers, the peak a finite number >= 0 (a foreign
// writer may have put anything there).
std::optional<MachineFigures> figures_of(const Stmt &s, int first) {
    MachineFigures m;
    m.l1d_bytes = s.integer(first);
    m.l2_bytes = s.integer(first + 1);
    m.l3_bytes = s.integer(first + 2);
    m.vector_bits = int(s.integer(first + 3));
    m.cores = int(s.integer(first + 4));
    m.peak_gflops = s.real(first + 5);
    if (m.l1d_bytes <= 0 || m.l2_bytes <= 0 || m.l3_bytes <= 0 || m.vector_bits <= 0 ||
        m.cores <= 0 || !(m.peak_gflops >= 0) || !std::isfinite(m.peak_gflops))
        return std::nullopt;
    return m;
}

}  // namespace

std::string base_fingerprint(const std::string &fingerprint) {
    const size_t at = fingerprint.find(kThreadsTag);
    return at == std::string::npos ? fingerprint : fingerprint.substr(0, at);
}

int fingerprint_threads(const std::string &fingerprint) {
    const size_t at = fingerprint.find(kThreadsTag);
    if (at == std::string::npos) return 1;
    const int n = std::atoi(fingerprint.c_str() + at + std::char_traits<char>::length(kThreadsTag));
    return n > 0 ? n : 1;
}

void create_machines_table(Connection &c) {
    c.exec(R"(CREATE TABLE IF NOT EXISTS machines (
                  machine     TEXT    PRIMARY KEY,
                  l1d_bytes   INTEGER NOT NULL,
                  l2_bytes    INTEGER NOT NULL,
                  l3_bytes    INTEGER NOT NULL,
                  vector_bits INTEGER NOT NULL,
                  cores       INTEGER NOT NULL,
                  peak_gflops REAL    NOT NULL))",
           "create the machines table");
}

void copy_machines(Connection &src, Connection &dest) {
    if (!has_machines_table(src)) return;
    Stmt read(src.db, fmt::format("SELECT {} FROM machines", kColumns), src.path);
    Stmt write(dest.db,
               fmt::format("INSERT INTO machines ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                           "ON CONFLICT DO NOTHING",
                           kColumns),
               dest.path);
    while (read.step()) {
        const std::optional<MachineFigures> m = figures_of(read, 1);
        if (!m || read.text(0).empty()) continue;  // an invalid row stays out, as in measurements
        write.reset()
            .bind(1, read.text(0))
            .bind(2, m->l1d_bytes)
            .bind(3, m->l2_bytes)
            .bind(4, m->l3_bytes)
            .bind(5, int64_t(m->vector_bits))
            .bind(6, int64_t(m->cores))
            .bind(7, m->peak_gflops)
            .run();
    }
}

void MeasurementStore::put_machine(const std::string &fingerprint, const MachineFigures &m) {
    if (impl_->read_only) throw Error(fmt::format("{}: opened read-only", path()));
    if (m.l1d_bytes <= 0 || m.l2_bytes <= 0 || m.l3_bytes <= 0 || m.vector_bits <= 0 ||
        m.cores <= 0 || !(m.peak_gflops >= 0) || !std::isfinite(m.peak_gflops))
        throw Error(fmt::format("{}: refusing to store invalid figures of machine '{}'", path(),
                                fingerprint));
    std::lock_guard lock(impl_->mu);
    WriteTransaction tx(impl_->conn);
    Stmt s(impl_->conn.db,
           fmt::format("INSERT OR REPLACE INTO machines ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                       kColumns),
           path());
    s.bind(1, base_fingerprint(fingerprint))
        .bind(2, m.l1d_bytes)
        .bind(3, m.l2_bytes)
        .bind(4, m.l3_bytes)
        .bind(5, int64_t(m.vector_bits))
        .bind(6, int64_t(m.cores))
        .bind(7, m.peak_gflops)
        .run();
    tx.commit();
}

std::optional<MachineFigures> MeasurementStore::machine(const std::string &fingerprint) {
    std::lock_guard lock(impl_->mu);
    Connection &c = impl_->conn;
    if (!has_machines_table(c)) return std::nullopt;
    Stmt s(c.db, fmt::format("SELECT {} FROM machines WHERE machine = ?1", kColumns), c.path);
    s.bind(1, base_fingerprint(fingerprint));
    std::optional<MachineFigures> out;
    if (s.step()) out = figures_of(s, 1);
    s.reset();
    return out;
}

}  // namespace looptune
