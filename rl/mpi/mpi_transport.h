// The messages of Ape-X across MPI ranks (rl/mpi/apex_mpi.cpp) as byte buffers, without MPI or
// LibTorch here so the formats can be tested on their own. Every buffer starts with a 32-bit
// tag naming its kind; values are in the machine's byte order (every rank runs the same
// build). A truncated or mislabelled buffer throws looptool::Error.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "rl/replay.h"

namespace looptune {

/// Transitions with the initial priorities their actor computed (actor rank -> learner).
std::vector<char> encode_transitions(const std::vector<Transition> &ts,
                                     const std::vector<float> &priorities);
void decode_transitions(const std::vector<char> &buffer, std::vector<Transition> *ts,
                        std::vector<float> *priorities);

/// What an actor rank did since its previous status (actor rank -> learner); also its heartbeat.
struct ActorStatus {
    int64_t env_steps = 0, episodes = 0;
    std::vector<float> episode_rewards, episode_speedups;  ///< one per finished episode
};
std::vector<char> encode_status(const ActorStatus &s);
ActorStatus decode_status(const std::vector<char> &buffer);

/// The learner's weights as one flat vector (learner -> actor ranks); `version` counts
/// publications.
std::vector<char> encode_weights(int64_t version, const std::vector<float> &weights);
std::vector<float> decode_weights(const std::vector<char> &buffer, int64_t *version);

/// How many env steps an actor rank may have taken in all, so far (learner -> actor rank).
std::vector<char> encode_grant(int64_t steps);
int64_t decode_grant(const std::vector<char> &buffer);

/// A short text (an error message, or nothing).
std::vector<char> encode_text(const std::string &text);
std::string decode_text(const std::vector<char> &buffer);

/// An error as text for another rank with its class kept: a trailing '\1' marks a
/// looptool::InternalError (a trailing mark survives the "rank R: " put in front on the way).
/// Anything else travels as a looptool::Error.
std::string error_text(std::exception_ptr error);
std::exception_ptr error_from_text(const std::string &text);

}  // namespace looptune
