// What the two sides of Ape-X over MPI share (rl/mpi/apex_mpi.cpp: the set-up;
// rl/mpi/apex_mpi_rank_zero.cpp: rank 0, the learner; rl/mpi/apex_mpi_actor.cpp: the actor
// ranks): message tags, pacing constants, weights as one flat vector. Only those files include
// it (MPI and LibTorch).
#pragma once

#include <chrono>
#include <vector>

#include "env/dataset.h"
#include "rl/learner.h"
#include "rl/mpi/mpi_comm.h"
#include "rl/qnet.h"
#include "rl/trainer.h"

namespace looptune {
class TrainingRun;
}

namespace looptune::apex_mpi {

// Messages are point to point, every receive taking any tag so one rank's messages arrive in
// order (encodings: rl/mpi/mpi_transport.h; when each is sent: docs/distributed.md).
enum Tag : int {
    // actor rank -> 0
    kTransitions = 1,  ///< 16 transitions, with the actor's priorities
    kStatus,           ///< steps and episodes since the last; also the heartbeat
    kFailed,           ///< an actor's error, with its class
    kBye,              ///< the last message of an actor rank
    // 0 -> actor rank
    kWeights,  ///< every weight_sync updates
    kGrant,    ///< steps the rank may have taken in all: kGrantPerActor per actor ahead, never
               ///< past --steps nor the replay ratio's pace; also the heartbeat
    kStop,
};

inline constexpr double kHeartbeatSeconds = 0.5;
inline constexpr size_t kMaxInFlight = 8;  // transition batches an actor rank sends at once
inline constexpr size_t kOutboxLimit =
    64;  // batches queued on an actor rank before its actors wait
inline constexpr int64_t kGrantPerActor = 64;      // steps granted ahead per actor
inline constexpr int64_t kPaceSlackPerActor = 16;  // steps per actor past the replay ratio's pace
inline constexpr auto kPoll = std::chrono::milliseconds(2);

inline double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/// Every parameter and buffer of `net`, in registration order, as one vector.
std::vector<float> flat_weights(const QNet &net);
/// The inverse; throws looptool::Error when the sizes differ (another build or other settings).
void set_flat_weights(QNet &net, const std::vector<float> &weights);

/// An actor rank (rank > 0): config.actors actor threads and the main thread that talks to rank
/// 0 for them, until rank 0 says stop. Starts from rank 0's `weights` and step count.
TrainSummary actor_rank(const mpi::Session &world, const TrainConfig &c, const Dataset &dataset,
                        const QNetConfig &net_config, const std::vector<float> &weights,
                        int64_t start_steps);

/// Rank 0: the learner on a thread of its own, the replay the actor ranks feed, their grants and
/// weights, and the run's checkpoints, evaluation (in `eval_env`), metrics and progress, until
/// the run ends; then stops the actor ranks. Throws the run's first failure, after a checkpoint.
TrainSummary rank_zero(const mpi::Session &world, TrainingRun &run, Environment &eval_env,
                       const QNetConfig &net_config, Learner &learner, PrioritizedReplay &replay,
                       const std::vector<Demo> &demos);

}  // namespace looptune::apex_mpi
