// Search traces for warm starts (after MLGO's behavioral cloning): the best action sequence a
// search found on a benchmark. CSV with a header:
//   benchmark,algo,gflops,base_gflops,actions
// where benchmark is the file's path and actions are space-separated action names.
#pragma once

#include <string>
#include <vector>

#include "looptool/actions/actions.h"

namespace looptune {

struct Trace {
    std::string benchmark, algo;
    double gflops = 0, base_gflops = 0;
    std::vector<looptool::Action> actions;
};

/// Appends rows (writing the header first when the file is new or empty). Each call rewrites
/// the file through a temporary file and a rename, so a crash never leaves half a row.
void append_traces(const std::string &path, const std::vector<Trace> &traces);
/// Throws looptool::Error naming the file and line for a missing file or a malformed row.
std::vector<Trace> load_traces(const std::string &path);

}  // namespace looptune

namespace looptune {
/// Drops adjacent cursor moves that cancel (up then down, down then up) when the shorter
/// sequence reaches the same schedule with the cursor in the same place; searches wander, and
/// demonstrations should not teach the wandering.
std::vector<looptool::Action> drop_cancelling_moves(const looptool::Program &start,
                                                    const std::vector<looptool::Action> &actions);
}  // namespace looptune
