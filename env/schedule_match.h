// A schedule given as a program file (`export --schedule`, Python's `measure(schedule=...)`)
// checked against the benchmark it is said to schedule.
#pragma once

#include <string>

#include "looptool/ir/loop_tree.h"

namespace looptune {

/// Throws looptool::Error (naming both files and why) unless `schedule` schedules `bench`'s
/// computation: the same computation, or one a layout action made of it (`pack` adds a scratch
/// copy and cuts variables, `flatten` merges dimensions), which must have the same name and
/// tensors (looptool::same_storage) and compute the same outputs: its kernel is run on the
/// benchmark's inputs and compared with the benchmark's reference.
void check_schedule_of(const looptool::Program &bench, const std::string &bench_path,
                       const looptool::Program &schedule, const std::string &schedule_path);

}  // namespace looptune
