// The persistent measurement store: every measurement in SQLite, keyed by benchmark,
// canonical schedule (schedule_key) and machine fingerprint, so a run of the same schedule
// on the same machine is a lookup. Schema and concurrency model: docs/store.md.
//
// Concurrency: the file is in WAL mode with a busy timeout, so several processes and threads
// may read and write one store at once. A MeasurementStore object is one SQLite connection
// and is internally synchronised (a mutex around every call), so sharing one between threads
// is safe but serialises them; threads that write often should each open their own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "util/machine.h"

namespace looptune {

struct StoredMeasurement {
    double median_gflops = 0;
    int runs = 0;
    double cv = 0;
    int64_t timestamp = 0;  ///< Unix seconds of the put; put() fills it in when 0
};

/// CPU model from /proc/cpuinfo, the peak rounded to whole GFLOPS and the version of the
/// kernel code (looptool::kKernelCodeVersion), e.g. "AMD EPYC 9R45 96-Core
/// Processor|peak=226|code=2".
std::string machine_fingerprint(double peak_gflops);

/// The machine part of a row's fingerprint: without the "|threads=N" the environment appends
/// for parallel schedules.
std::string base_fingerprint(const std::string &fingerprint);
/// N of a fingerprint's "|threads=N", 1 without one.
int fingerprint_threads(const std::string &fingerprint);

class MeasurementStore {
public:
    /// The schema version this code writes; open() refuses files with a newer one.
    static constexpr int kSchemaVersion = 1;

    /// Opens the store at `path`, creating it when missing (unless `create` is false).
    /// Throws looptool::Error, naming the path, for a file that is not SQLite, a corrupt one,
    /// a SQLite database that is not a looptune store, or a newer schema version.
    static std::unique_ptr<MeasurementStore> open(const std::string &path, bool create = true);
    /// Opens an existing store for reading only (SQLITE_OPEN_READONLY): nothing in the file
    /// changes, not even its journal mode. put() and merge_from() then throw. Same errors as
    /// open(), and an empty file or database is an error too.
    static std::unique_ptr<MeasurementStore> open_read_only(const std::string &path);
    ~MeasurementStore();
    MeasurementStore(const MeasurementStore &) = delete;
    MeasurementStore &operator=(const MeasurementStore &) = delete;

    const std::string &path() const;

    std::optional<StoredMeasurement> lookup(const std::string &benchmark,
                                            const std::string &schedule,
                                            const std::string &machine);
    /// Inserts or replaces, in its own committed transaction.
    void put(const std::string &benchmark, const std::string &schedule, const std::string &machine,
             const StoredMeasurement &m);

    /// Keeps `figures` as the figures of `fingerprint`'s machine (its base_fingerprint()),
    /// replacing what was kept: the machine vector of the rows measured on it.
    void put_machine(const std::string &fingerprint, const MachineFigures &figures);
    /// The figures kept for `fingerprint`'s machine; none for a machine the store has no
    /// figures of (a store written before it kept them, or figures never put).
    std::optional<MachineFigures> machine(const std::string &fingerprint);

    struct Row {
        std::string benchmark, schedule;
        double median_gflops = 0;
    };
    /// Every valid row measured on `machine`, in insertion order (a cost model's training set).
    std::vector<Row> rows(const std::string &machine);

    struct MachineStats {
        std::string machine;
        int64_t measurements = 0, benchmarks = 0;
        double best_gflops = 0;
    };
    struct Stats {
        std::string path;
        int schema_version = 0;
        int64_t measurements = 0, benchmarks = 0, machines = 0;
        double best_gflops = 0;
        std::string best_benchmark;             ///< where best_gflops was measured
        std::vector<MachineStats> per_machine;  ///< sorted by machine
        int64_t invalid = 0;  ///< rows with invalid values (check() says which), left out above
    };
    Stats stats();

    /// SQLite's full integrity check (reads every page; slow on a large store), then the values:
    /// counts of rows whose GFLOPS or CV are not finite numbers >= 0 (text, -inf, ...), whose
    /// runs or timestamp are not integers >= 0, or whose key columns are not non-empty text.
    /// Returns the problems found, empty when the store is sound. open() only checks the
    /// header, schema and metadata; damage elsewhere surfaces as looptool::Error from the
    /// query that reads it. lookup(), stats() and merge_from() ignore rows with invalid values.
    std::vector<std::string> check();

    /// Copies every valid row of the store at `other_path` into this one, in one transaction;
    /// rows whose key is already here are kept as they are. Its machines' figures come too
    /// (this store's own kept for a machine both have). Returns the number of rows added
    /// (`skipped`, when given, receives the number of rows with invalid values left out).
    /// Throws looptool::Error if `other_path` is missing, not a store, or this same file.
    int64_t merge_from(const std::string &other_path, int64_t *skipped = nullptr);
    /// Writes a consistent copy of the whole store to the new file `dest_path` (for shipping a
    /// node-local store to another host). Throws looptool::Error if `dest_path` exists.
    void snapshot_to(const std::string &dest_path);

private:
    struct Impl;
    explicit MeasurementStore(std::unique_ptr<Impl> impl);
    static void prepare_lookup(Impl &impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace looptune
