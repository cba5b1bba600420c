// The end of an Ape-X run over MPI with a node-local --store (rl/mpi/apex_mpi.cpp): every
// node's measurement store merged into the run directory, so it keeps them all. Built only
// with MPI (LOOPTUNE_WITH_MPI).
#pragma once

#include <string>
#include <vector>

#include "rl/mpi/mpi_comm.h"
#include "rl/trainer.h"

namespace looptune {

/// Message tags of the merge (apart from apex_mpi.cpp's, which end before these).
enum NodeStoreTag : int { kStore = 100, kStoreFailed };

/// "%h" in a --store path is the rank's host name: per-node files on a shared file system.
std::string store_for_host(const std::string &path, const std::string &host);

/// With a node-local --store, measurements are spread over one store per host. Once every rank
/// has stopped measuring, the first rank of each host other than rank 0's sends a snapshot of
/// its store, and rank 0 merges its own store and those into RUN_DIR/store.sqlite (what
/// `looptool store merge` does). Failures here cost only measurements, never the trained
/// policy: they are reported as warnings with the command that finishes the merge by hand.
/// Every rank calls it; nothing happens without --store.
void merge_node_stores(const mpi::Session &world, const TrainConfig &c,
                       const std::vector<std::string> &hosts);

}  // namespace looptune
