// Running one method of the comparison on one benchmark: a search, a registered method (the
// policy) or a library kernel, each from the naive nest, then its final schedule measured by the
// judge and checked against the reference.
#pragma once

#include <functional>
#include <string>

#include "env/environment.h"
#include "experiments/compare.h"

namespace looptune {

/// The suffix of a method run with CompareConfig::constant_inputs (`policy-prepacked`).
inline constexpr const char *kPrepackedSuffix = "-prepacked";
/// Whether `method` is another one with kPrepackedSuffix.
bool is_prepacked(const std::string &method);
/// `method` without kPrepackedSuffix.
std::string unprepacked(const std::string &method);

/// The libraries (openblas, onednn, onednn-conv-*) run kernels of their own, not schedules.
bool is_library(const std::string &method);

/// Whether `method` runs on `c`: a library only on its own kind of benchmark (the conv methods
/// on conv2d, openblas and onednn on matmul); every other method on every benchmark.
bool runs_on(const std::string &method, const looptool::Computation &c);

/// The environment `method` tunes in: compare's action space, store and memory limit, the step
/// limit of method_steps(), and what a registered method changes in it (a policy's own).
EnvConfig method_environment(const CompareConfig &c, const std::string &method);

/// The actions per sequence `method` may take: --steps when given, else what it needs (a
/// search's default_steps(), a registered method's own); 0 for base and the libraries.
int method_steps(const CompareConfig &c, const std::string &method);

/// One method on one benchmark: tunes from the naive nest, re-measures the final schedule with
/// the judge and checks it against the reference, filling `row`. Throws on any failure of this
/// one row. Returns what measures the final kernel again (for the judge's alternating rounds),
/// or nothing for `base` and a kernel too slow for the protocol's cap (its figure is already
/// from calls of seconds each).
std::function<double()> measure_row(const CompareConfig &c, Environment &judge,
                                    const looptool::Program &naive, CompareRow &row);

}  // namespace looptune
