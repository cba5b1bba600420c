// A schedule's counterpart on the other side of `parallel`: the same loops with their outermost
// ones shared across threads, or the same loops on one thread. Neither side wins everywhere (a
// pool's dispatch costs more than a tiny kernel's work; a GEMV of a few hundred KB gains from a
// second core), so tune measures both (tune/guided_finals.h).
#pragma once

#include <optional>
#include <vector>

#include "looptool/actions/actions.h"

namespace looptune {

/// Whether a loop of `p` is marked `parallel`.
bool has_parallel(const looptool::Program &p);

/// Actions that, applied to `p`, mark the outermost loop of every nest `parallel` where that is
/// legal and has `threads` iterations at least (a batch loop of one gives way to the loop below
/// it); nothing when the nest that reduces (the matmul's or conv's work) is not among them.
std::optional<std::vector<looptool::Action>> parallel_actions(const looptool::Program &p,
                                                              int threads);

/// `path` (actions from `start`) without its `parallel` actions, when the rest still applies
/// to `start` (a parallel mark only forbids actions, so it does where none of `path`'s was
/// illegal); nothing when `path` has no `parallel` action.
std::optional<std::vector<looptool::Action>> serial_path(const looptool::Program &start,
                                                         const std::vector<looptool::Action> &path);

}  // namespace looptune
