// Ape-X across MPI ranks (`looptool train --trainer apex --distributed mpi`, under mpirun or
// srun): the actor and learner loops of rl/apex_loop.h, linked over MPI instead of threads.
//
//   rank 0      the learner: central prioritized replay, learner thread, checkpoints,
//               evaluation, metrics and progress; the only rank that writes the run directory
//               (rl/mpi/apex_mpi_rank_zero.cpp).
//   rank r > 0  config.actors actor threads, each with its own Environment and JIT, acting with
//               apex_epsilon(i, N) over the global actor index i = (r - 1) * actors + t of
//               N = (ranks - 1) * actors actors; the measurement store (--store, default
//               RUN_DIR/store.sqlite) is shared by the ranks of a node
//               (rl/mpi/apex_mpi_actor.cpp).
//
// This file: the set-up every rank goes through, step by step, before either side runs.
// Messages: the tags in rl/mpi/apex_mpi.h (a table of when each is sent: docs/distributed.md).
// Only each rank's main thread calls MPI (MPI_THREAD_FUNNELED; rl/mpi/mpi_comm.h); actor and
// learner threads talk to it through queues. Waits poll with short sleeps, since ranks share
// cores. A rank silent for config.mpi_timeout seconds ends the run: rank 0 writes a checkpoint,
// says how to resume and aborts the job; SIGTERM on rank 0 (what mpirun sends when another rank
// dies, and what Slurm sends at a time limit) does the same. docs/distributed.md ("MPI").
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "looptool/ir/error.h"
#include "rl/apex_loop.h"
#include "rl/demonstrations.h"
#include "rl/mpi/apex_mpi.h"
#include "rl/mpi/mpi_comm.h"
#include "rl/mpi/mpi_transport.h"
#include "rl/mpi/node_stores.h"
#include "rl/training_run.h"

namespace looptune {

namespace {

using namespace apex_mpi;

/// Runs `step` on this rank; every rank learns the first error of any rank: rank 0 rethrows it
/// (with its class), the others return true to leave quietly (rank 0's exit status fails the
/// job).
bool failed_together(const mpi::Session &world, const std::function<void()> &step) {
    std::string error;
    try {
        step();
    } catch (...) {
        error = error_text(std::current_exception());
    }
    const std::string first = mpi::first_error(world, error);
    if (first.empty()) return false;
    if (world.rank == 0) std::rethrow_exception(error_from_text(first));
    return true;
}

/// What a rank builds before training, in order (rank 0: all of it; actor ranks: the run's
/// settings and dataset, an environment, the network's shape and size).
struct RankSetup {
    std::optional<TrainingRun> run;
    std::unique_ptr<Environment> env;  // rank 0: the evaluation's
    QNetConfig net_config;
    std::unique_ptr<Learner> learner;
    std::unique_ptr<PrioritizedReplay> replay;
    std::vector<Demo> demos;
    std::vector<float> weights;
};

// 1. The settings and the dataset, then rank 0 claims the run directory (which holds the default
// store): nothing is created before every input has been read.
void read_inputs(const mpi::Session &world, const TrainConfig &c,
                 const std::vector<std::string> &hosts, RankSetup &s) {
    if (c.store_path.empty() &&
        std::any_of(hosts.begin(), hosts.end(), [&](auto &h) { return h != hosts[0]; }))
        throw looptool::Error(
            "--distributed mpi over several hosts needs --store with a node-local path (the "
            "same on every node, e.g. /tmp/looptune_store.sqlite): SQLite's WAL store cannot "
            "be shared across hosts");
    s.run.emplace(c);
    if (world.rank == 0) s.run->create_dir();
}

// 3. Every rank: environment, network shape; rank 0 also the learner and replay, the checkpoint
// when resuming, and the warm start.
void build(const mpi::Session &world, const TrainConfig &c, RankSetup &s) {
    if (!s.env) s.env = std::make_unique<Environment>(train_env_config(c));
    s.net_config = net_config_for(c, *s.env);
    if (world.rank == 0) {
        s.learner = std::make_unique<Learner>(c, s.net_config);
        s.replay = std::make_unique<PrioritizedReplay>(c.replay_capacity, c.per_alpha, c.seed);
        s.run->start(*s.learner);
        s.demos = warm_start(c, *s.env, *s.learner, *s.replay, s.run->resumed());
        s.weights = flat_weights(s.learner->online);
    } else {
        s.weights = flat_weights(QNet(s.net_config));  // the size, to check rank 0's against
    }
}

// 4. Rank 0's starting point (step count and weights) to everyone; the step count, or none when
// some rank's network differs from rank 0's (failed_together: rank 0 throws).
std::optional<int64_t> share_start(const mpi::Session &world, RankSetup &s) {
    int64_t start[2] = {world.rank == 0 ? s.run->start_steps() : 0,
                        static_cast<int64_t>(s.weights.size())};
    mpi::bcast(start, 2, MPI_INT64_T, 0);
    const auto check_size = [&] {
        if (start[1] != static_cast<int64_t>(s.weights.size()))
            throw looptool::Error(
                fmt::format("its network has {} weights, rank 0's {} (different builds or "
                            "settings?)",
                            s.weights.size(), start[1]));
    };
    if (failed_together(world, check_size)) return std::nullopt;
    mpi::bcast(s.weights.data(), static_cast<int>(s.weights.size()), MPI_FLOAT, 0);
    return start[0];
}

}  // namespace

TrainSummary train_apex_mpi(const TrainConfig &config) {
    if (config.mpi_timeout <= 0) throw looptool::Error("--mpi-timeout must be positive");
    mpi::Session world;
    const std::vector<std::string> hosts = mpi::host_names();
    TrainConfig c = config;
    c.store_path = store_for_host(config.store_path, hosts[size_t(world.rank)]);
    if (world.size < 2)
        throw looptool::Error(
            "--distributed mpi needs at least 2 MPI processes (mpirun -np 2 or more, or srun): "
            "rank 0 learns, every other rank acts");
    // Every step below may fail on some ranks: all learn the first error (failed_together).
    TrainSummary quiet;
    quiet.primary = false;
    RankSetup s;
    if (failed_together(world, [&] { read_inputs(world, c, hosts, s); })) return quiet;
    // 2. The first rank on each host opens (and may create) the store before the others: several
    // processes creating one SQLite file at once can fail with "database is locked".
    const bool first_on_host =
        std::find(hosts.begin(), hosts.end(), hosts[world.rank]) - hosts.begin() == world.rank;
    if (failed_together(world, [&] {
            if (first_on_host) s.env = std::make_unique<Environment>(train_env_config(c));
        }))
        return quiet;
    if (failed_together(world, [&] { build(world, c, s); })) return quiet;
    const std::optional<int64_t> start_steps = share_start(world, s);
    if (!start_steps) return quiet;
    const int num_actors = (world.size - 1) * c.actors;
    if (world.rank == 0)
        s.run->note(fmt::format(
            "MPI: rank 0 learns, {} ranks x {} actors act (eps {:.3g} .. {:.3g})", world.size - 1,
            c.actors, apex_epsilon(c, 0, num_actors), apex_epsilon(c, num_actors - 1, num_actors)));

    TrainSummary summary;
    if (world.rank != 0) {
        summary = actor_rank(world, c, s.run->dataset(), s.net_config, s.weights, *start_steps);
    } else {
        s.run->loop_started(s.learner->updates);
        summary = rank_zero(world, *s.run, *s.env, s.net_config, *s.learner, *s.replay, s.demos);
    }
    merge_node_stores(world, c, hosts);
    return summary;
}

}  // namespace looptune
