#include "env/store/schedule_library.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "env/store/measurement_store.h"
#include "env/store/sqlite.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "util/cache_dir.h"

namespace looptune {

namespace {

using looptool::Error;
using store_sqlite::Connection;
using store_sqlite::Stmt;
using store_sqlite::WriteTransaction;

constexpr const char *kCreate =
    "CREATE TABLE IF NOT EXISTS schedule_library ("
    "machine TEXT NOT NULL, computation TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, "
    "shape TEXT NOT NULL, program TEXT NOT NULL, actions TEXT NOT NULL, gflops REAL NOT NULL, "
    "start_gflops REAL NOT NULL, verified INTEGER NOT NULL, version TEXT NOT NULL, "
    "timestamp INTEGER NOT NULL, PRIMARY KEY (machine, computation))";

constexpr const char *kColumns =
    "machine, computation, name, kind, shape, program, actions, gflops, start_gflops, verified, "
    "version, timestamp";

// What a valid row holds: SQLite keeps whatever a foreign writer put in a column.
constexpr const char *kValidRow =
    "typeof(gflops) IN ('real', 'integer') AND gflops >= 0 AND gflops < 1e308 "
    "AND typeof(start_gflops) IN ('real', 'integer') AND start_gflops >= 0 "
    "AND start_gflops < 1e308 AND typeof(verified) = 'integer' "
    "AND typeof(timestamp) = 'integer' AND typeof(program) = 'text' AND program <> ''";

std::string joined(const std::vector<int64_t> &v) { return fmt::format("{}", fmt::join(v, ",")); }

std::vector<int64_t> numbers(const std::string &text) {
    std::vector<int64_t> out;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) out.push_back(std::atoll(item.c_str()));
    return out;
}

std::vector<std::string> words(const std::string &text) {
    std::vector<std::string> out;
    std::stringstream in(text);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

LibraryEntry read_entry(const Stmt &s) {
    LibraryEntry e;
    e.machine = s.text(0);
    e.computation = s.text(1);
    e.name = s.text(2);
    e.kind = s.text(3);
    e.shape = numbers(s.text(4));
    e.program = s.text(5);
    e.actions = words(s.text(6));
    e.gflops = s.real(7);
    e.start_gflops = s.real(8);
    e.verified = s.integer(9) != 0;
    e.version = s.text(10);
    e.timestamp = s.integer(11);
    return e;
}

bool library_table_exists(Connection &c) {
    Stmt s(c.db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schedule_library'",
           c.path);
    return s.step();
}

}  // namespace

std::string computation_key(const looptool::Computation &c) {
    looptool::Computation unnamed = c;
    unnamed.name = "-";
    auto comp = std::make_shared<const looptool::Computation>(std::move(unnamed));
    return looptool::serialize(looptool::Program::naive(comp));
}

void describe_shape(const looptool::Computation &c, LibraryEntry &e) {
    e.kind.clear();
    e.shape.clear();
    auto extent = [&](const char *var) {
        const int v = c.var_index(var);
        return v < 0 ? int64_t(0) : c.vars[size_t(v)].extent;
    };
    const std::string key = computation_key(c);
    if (c.vars.size() == 3 && extent("m") && extent("n") && extent("k") &&
        computation_key(looptool::make_matmul(extent("m"), extent("n"), extent("k"))) == key) {
        e.kind = "matmul";
        e.shape = {extent("m"), extent("n"), extent("k")};
        return;
    }
    const auto p = looptool::conv_params(c);
    if (!p) return;
    try {
        if (computation_key(looptool::make_padded_conv2d(p->n, p->ci, p->h, p->w, p->co, p->kh,
                                                         p->kw, p->stride, p->pad)) != key)
            return;
    } catch (const looptool::Error &) {
        return;  // a form make_padded_conv2d does not write (a padding as large as the kernel)
    }
    e.kind = "conv2d";
    e.shape = {p->n, p->ci, p->h, p->w, p->co, p->kh, p->kw};
    if (p->stride != 1 || p->pad != 0) e.shape.insert(e.shape.end(), {p->stride, p->pad});
}

struct ScheduleLibrary::Impl {
    Connection conn;
    std::mutex mu;
    bool read_only = false;
    bool has_table = false;
    Impl(const std::string &path, int flags)
        : conn(path, flags), read_only(!(flags & SQLITE_OPEN_READWRITE)) {}
};

ScheduleLibrary::ScheduleLibrary(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ScheduleLibrary::~ScheduleLibrary() = default;

const std::string &ScheduleLibrary::path() const { return impl_->conn.path; }

std::unique_ptr<ScheduleLibrary> ScheduleLibrary::open(const std::string &path, bool create) {
    // The store's own checks and initialisation first: a foreign file is refused untouched.
    MeasurementStore::open(path, create);
    auto impl = std::make_unique<Impl>(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
    impl->conn.exec(kCreate, "create the schedule library table");
    impl->has_table = true;
    return std::unique_ptr<ScheduleLibrary>(new ScheduleLibrary(std::move(impl)));
}

std::unique_ptr<ScheduleLibrary> ScheduleLibrary::open_read_only(const std::string &path) {
    MeasurementStore::open_read_only(path);
    auto impl = std::make_unique<Impl>(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
    impl->has_table = library_table_exists(impl->conn);
    return std::unique_ptr<ScheduleLibrary>(new ScheduleLibrary(std::move(impl)));
}

std::string ScheduleLibrary::default_path(const std::string &store) {
    if (const char *p = std::getenv("LOOPTUNE_LIBRARY"); p && *p)
        return std::string(p) == "off" ? "" : p;
    if (!store.empty()) return store;
    const std::string dir = looptune_cache_dir();
    return dir.empty() ? "" : dir + "/store.sqlite";
}

std::optional<LibraryEntry> ScheduleLibrary::find(const std::string &machine,
                                                  const std::string &computation) {
    std::lock_guard lock(impl_->mu);
    if (!impl_->has_table) return std::nullopt;
    Stmt s(impl_->conn.db,
           fmt::format("SELECT {} FROM schedule_library WHERE machine = ?1 AND computation = ?2 "
                       "AND {}",
                       kColumns, kValidRow),
           path());
    s.bind(1, machine).bind(2, computation);
    if (!s.step()) return std::nullopt;
    return read_entry(s);
}

void ScheduleLibrary::put(const LibraryEntry &e) {
    std::lock_guard lock(impl_->mu);
    if (impl_->read_only) throw Error(fmt::format("{}: opened read-only", path()));
    if (e.machine.empty() || e.computation.empty() || e.program.empty() ||
        !std::isfinite(e.gflops) || e.gflops < 0 || !std::isfinite(e.start_gflops) ||
        e.start_gflops < 0)
        throw Error(
            fmt::format("{}: refusing an incomplete library entry for '{}'", path(), e.name));
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    WriteTransaction tx(impl_->conn);
    Stmt s(impl_->conn.db,
           fmt::format("INSERT OR REPLACE INTO schedule_library ({}) VALUES "
                       "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                       kColumns),
           path());
    s.bind(1, e.machine).bind(2, e.computation).bind(3, e.name).bind(4, e.kind);
    s.bind(5, joined(e.shape)).bind(6, e.program);
    s.bind(7, fmt::format("{}", fmt::join(e.actions, " ")));
    s.bind(8, e.gflops).bind(9, e.start_gflops).bind(10, int64_t(e.verified));
    s.bind(11, e.version).bind(12, e.timestamp ? e.timestamp : now);
    s.run();
    tx.commit();
}

std::vector<LibraryEntry> ScheduleLibrary::entries(const std::string &machine) {
    std::lock_guard lock(impl_->mu);
    std::vector<LibraryEntry> out;
    if (!impl_->has_table) return out;
    Stmt s(impl_->conn.db,
           fmt::format("SELECT {} FROM schedule_library WHERE machine = ?1 AND {} "
                       "ORDER BY kind, shape, name",
                       kColumns, kValidRow),
           path());
    s.bind(1, machine);
    while (s.step()) out.push_back(read_entry(s));
    return out;
}

std::vector<std::string> ScheduleLibrary::machines() {
    std::lock_guard lock(impl_->mu);
    std::vector<std::string> out;
    if (!impl_->has_table) return out;
    Stmt s(impl_->conn.db, "SELECT DISTINCT machine FROM schedule_library ORDER BY machine",
           path());
    while (s.step()) out.push_back(s.text(0));
    return out;
}

}  // namespace looptune
