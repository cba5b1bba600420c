// The schedule library: the best schedule `tune` found per computation and machine, kept in the
// measurement store's file (table schedule_library, docs/store.md), so tuning a computation
// seen before is a lookup, and `lib build` compiles every kernel tuned on a machine into one
// library. Opening it validates the file as MeasurementStore::open() does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptune {

struct LibraryEntry {
    std::string machine;      ///< machine_fingerprint()
    std::string computation;  ///< computation_key()
    std::string name;         ///< the benchmark's name when it was tuned
    std::string kind;         ///< "matmul", "conv2d" or "" (no dispatch by shape)
    /// matmul: M, N, K; conv2d: N, CI, H, W, CO, KH, KW, then STRIDE, PAD unless 1, 0
    std::vector<int64_t> shape;
    std::string program;               ///< the tuned schedule in looptool's text format
    std::vector<std::string> actions;  ///< from the naive nest to `program`
    double gflops = 0;                 ///< the tuned kernel, as tune measured it
    double start_gflops = 0;           ///< the naive nest, likewise
    bool verified = false;             ///< checked against the reference interpreter
    std::string version;               ///< looptool's version that tuned it
    int64_t timestamp = 0;             ///< Unix seconds; put() fills it in when 0
};

/// The computation as text without its name: two benchmarks of the same statements, tensors
/// and extents share it, whatever they are called.
std::string computation_key(const looptool::Computation &c);

/// The kind and shape lib build dispatches by: matmul (C = A B, variables m, n, k) or conv2d
/// (as generate writes them: make_padded_conv2d), else kind "" and no shape.
void describe_shape(const looptool::Computation &c, LibraryEntry &e);

class ScheduleLibrary {
public:
    /// The library in the store at `path`, created (with the store) when missing unless
    /// `create` is false. Throws looptool::Error naming the path as MeasurementStore::open().
    static std::unique_ptr<ScheduleLibrary> open(const std::string &path, bool create = true);
    /// Reading only; a store without a library reads as an empty one.
    static std::unique_ptr<ScheduleLibrary> open_read_only(const std::string &path);
    /// The default store of tune's library: $LOOPTUNE_LIBRARY, else `store` (the measurement
    /// store in use) when not empty, else $XDG_CACHE_HOME/looptune/store.sqlite, else
    /// ~/.cache/looptune/store.sqlite; "" when LOOPTUNE_LIBRARY is "off" or none is set.
    static std::string default_path(const std::string &store = "");
    ~ScheduleLibrary();
    ScheduleLibrary(const ScheduleLibrary &) = delete;
    ScheduleLibrary &operator=(const ScheduleLibrary &) = delete;

    const std::string &path() const;
    std::optional<LibraryEntry> find(const std::string &machine, const std::string &computation);
    /// Inserts or replaces the entry of (machine, computation), in its own transaction.
    void put(const LibraryEntry &e);
    /// Every valid entry of `machine`, by kind, shape and name.
    std::vector<LibraryEntry> entries(const std::string &machine);
    /// The machines with entries, sorted.
    std::vector<std::string> machines();

private:
    struct Impl;
    explicit ScheduleLibrary(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace looptune
