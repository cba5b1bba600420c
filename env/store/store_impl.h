// The measurement store's connection state, shared by its source files (measurement_store.cpp,
// machines_table.cpp); nothing outside env/store includes it.
#pragma once

#include <mutex>
#include <string>

#include "env/store/measurement_store.h"
#include "env/store/sqlite.h"

namespace looptune {

struct MeasurementStore::Impl {
    store_sqlite::Connection conn;
    std::mutex mu;
    store_sqlite::Stmt lookup, put;

    bool read_only = false;

    Impl(const std::string &path, int flags)
        : conn(path, flags), read_only(!(flags & SQLITE_OPEN_READWRITE)) {}
};

/// Creates the machines table unless the store has it (a store written before it had none):
/// inside open()'s write transaction.
void create_machines_table(store_sqlite::Connection &c);
/// Copies `src`'s machines rows (when it has the table) into `dest`, keeping dest's own for a
/// fingerprint both hold; inside merge_from()'s transactions.
void copy_machines(store_sqlite::Connection &src, store_sqlite::Connection &dest);

}  // namespace looptune
