// A policy file that needs no LibTorch to read: the policy's description and its network's
// weights as named float32 tensors, under a checksum. `tune` reads it with plain C++
// (policy/plain_qnet.h); `train` writes it (rl/policy_convert.h).
//
//   looptune-policy 1\n                      magic word and format version
//   meta BYTES\n JSON\n                      the description: action_space, max_steps,
//                                            network (encoder, widths, loops, actions), provenance
//   tensors COUNT\n                          then COUNT lines, one per tensor:
//   NAME RANK D0 ... D(RANK-1)\n             (names as LibTorch's module gives them)
//   data FLOATS\n                            FLOATS = the sum of the tensors' sizes
//   FLOATS x float32, little-endian          row-major, the tensors in the order listed
//   crc32 XXXXXXXX\n                         CRC-32 of every byte before this line
//
// Every check names the file: a wrong magic, version, count, shape or checksum, a truncated
// file or trailing bytes is a looptool::Error, never a crash or a partial policy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace looptune {

/// Longest episode a policy may have: `tune` measures every step of its rollout, so a policy
/// file asking for more (a crafted 2e9) is refused on load rather than tuned for hours.
inline constexpr int kMaxEpisodeSteps = 1000;

struct PolicyTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;  ///< row-major, the product of `shape` floats
};

struct PolicyFile {
    std::string meta_json;  ///< action_space, max_steps, network, provenance
    std::vector<PolicyTensor> tensors;
    /// The tensor called `name`, or null.
    const PolicyTensor *find(const std::string &name) const;
};

/// Writes `policy` to `path` under a temporary name renamed at the end (never half a file).
void write_policy_file(const std::string &path, const PolicyFile &policy);
/// Reads and checks a policy file; throws looptool::Error naming the file and what is wrong. A
/// LibTorch policy (the format before this one) is refused with the command that converts it.
PolicyFile read_policy_file(const std::string &path);

}  // namespace looptune
