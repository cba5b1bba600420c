#include "rl/mpi/node_stores.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "env/store/measurement_store.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptune {

namespace {
double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

std::string store_for_host(const std::string &path, const std::string &host) {
    std::string out = path;
    for (size_t at = out.find("%h"); at != std::string::npos; at = out.find("%h", at + host.size()))
        out.replace(at, 2, host);
    return out;
}

namespace {

/// A sender's side: a snapshot of this host's store to rank 0 (or why there is none).
void send_host_store(const mpi::Session &world, const TrainConfig &c) {
    std::vector<char> bytes;
    int tag = kStore;
    const std::string snapshot = fmt::format("{}.snapshot.{}", c.store_path, world.rank);
    try {
        std::filesystem::remove(snapshot);
        MeasurementStore::open(c.store_path, /*create=*/false)->snapshot_to(snapshot);
        std::ifstream in(snapshot, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
        if (!in.good() && !in.eof()) throw looptool::Error("cannot read " + snapshot);
        if (bytes.size() > size_t(INT32_MAX)) throw looptool::Error("the store is over 2 GB");
    } catch (const std::exception &e) {
        tag = kStoreFailed;
        const std::string why = fmt::format("{}: {}", c.store_path, e.what());
        bytes.assign(why.begin(), why.end());
    }
    std::error_code ec;
    std::filesystem::remove(snapshot, ec);
    mpi::Outgoing out;
    out.send(0, tag, std::move(bytes));
    if (!out.drain(c.mpi_timeout))
        looptool::warn(fmt::format("rank {}: rank 0 did not take this host's store within {:.0f} s",
                                   world.rank, c.mpi_timeout));
}

/// Rank 0: the store message of rank `r` into `bytes`; its tag, or 0 when nothing came within
/// the timeout. Only that message is left to come from a sender: Bye was its last one before.
int receive_host_store(int r, double timeout, std::vector<char> &bytes) {
    int from = 0, tag = 0;
    const double deadline = now() + timeout;
    while (!mpi::try_receive(r, &from, &tag, &bytes) || (tag != kStore && tag != kStoreFailed)) {
        if (now() > deadline) return 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return tag;
}

/// Rank 0: its own store, then each sender's, merged into `dest_path`; a store that does not
/// come is reported and skipped. Returns the measurements added.
int64_t merge_into(const std::string &dest_path, const TrainConfig &c,
                   const std::vector<std::string> &hosts, const std::vector<int> &senders) {
    auto dest = MeasurementStore::open(dest_path);
    std::error_code ec;
    int64_t added = 0;
    if (!std::filesystem::equivalent(c.store_path, dest_path, ec))
        added += dest->merge_from(c.store_path);
    for (int r : senders) {
        std::vector<char> bytes;
        const int tag = receive_host_store(r, c.mpi_timeout, bytes);
        const std::string &host = hosts[size_t(r)];
        if (tag != kStore) {
            looptool::warn(fmt::format(
                "the store of host {} (rank {}) was not merged: {}", host, r,
                tag == kStoreFailed ? std::string(bytes.begin(), bytes.end()) : "nothing came"));
            continue;
        }
        const std::string part = fmt::format("{}/store.{}.part", c.out_dir, r);
        looptool::write_file_atomically(part, std::string_view(bytes.data(), bytes.size()));
        try {
            added += dest->merge_from(part);
        } catch (...) {
            std::filesystem::remove(part, ec);
            throw;
        }
        std::filesystem::remove(part, ec);
    }
    return added;
}

}  // namespace

void merge_node_stores(const mpi::Session &world, const TrainConfig &c,
                       const std::vector<std::string> &hosts) {
    if (c.store_path.empty()) return;  // every rank wrote RUN_DIR/store.sqlite already
    const std::string dest_path = c.out_dir + "/store.sqlite";
    if (!mpi::barrier(c.mpi_timeout)) {
        if (world.rank == 0)
            looptool::warn(fmt::format(
                "some rank did not finish within {:.0f} s; node stores not merged into {} "
                "(use `looptool store merge --store {} <node stores>`)",
                c.mpi_timeout, dest_path, dest_path));
        return;
    }
    std::vector<int> senders;  // the first rank of every other host
    for (int r = 1; r < world.size; ++r)
        if (hosts[size_t(r)] != hosts[0] &&
            std::find(hosts.begin(), hosts.end(), hosts[size_t(r)]) - hosts.begin() == r)
            senders.push_back(r);

    if (world.rank != 0) {
        if (std::find(senders.begin(), senders.end(), world.rank) != senders.end())
            send_host_store(world, c);
        return;
    }
    try {
        const int64_t added = merge_into(dest_path, c, hosts, senders);
        if (c.progress)
            c.progress(fmt::format("stores of {} hosts merged into {}: {} new measurements",
                                   senders.size() + 1, dest_path, added));
    } catch (const std::exception &e) {
        looptool::warn(
            fmt::format("merging the node stores into {} failed: {}", dest_path, e.what()));
    }
}

}  // namespace looptune
