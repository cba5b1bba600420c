// `looptune.tune`: the schedule library's answer, or the guided search, as a dict.
#include "python/tune_binding.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "looptool/actions/actions.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "tune/guided_search.h"
#include "tune/schedule_library_use.h"
#include "util/threads.h"

namespace py = pybind11;
using namespace looptool;
using looptune::Environment;

namespace {

py::dict result_dict(const looptune::GuidedResult &r) {
    const std::vector<std::string> best = action_names(r.actions),
                                   seed = action_names(r.best_seed_actions),
                                   greedy = action_names(r.greedy.actions);
    py::dict d;
    d["program"] = serialize(r.best);
    d["gflops"] = r.best_gflops;
    d["base_gflops"] = r.base_gflops;
    d["speedup"] = r.base_gflops > 0 ? r.best_gflops / r.base_gflops : 0.0;
    d["best_actions"] = best;
    d["found_by"] = r.found_by;
    d["best_seed"] = r.best_seed;
    d["best_seed_gflops"] = r.best_seed_gflops;
    d["best_seed_actions"] = seed;
    py::list seeds;
    for (const auto &[name, gflops] : r.seed_gflops) seeds.append(py::make_tuple(name, gflops));
    d["seeds"] = seeds;
    d["greedy_gflops"] = r.greedy.best_gflops;
    d["greedy_actions"] = greedy;
    d["greedy_step_gflops"] = r.greedy.step_gflops;
    d["rollouts"] = r.rollouts;
    d["schedules"] = r.schedules;
    d["max_steps"] = r.max_steps;
    d["seconds"] = r.seconds;
    d["call_seconds"] = r.call_seconds;
    d["slice_images"] = r.slice_images;
    d["batch"] = r.batch;
    d["band_rows"] = r.band_rows;
    d["rows"] = r.rows;
    d["prefix_measurements"] = r.prefix_measurements;
    return d;
}

py::dict library_answer_dict(const looptune::LibraryAnswer &a, const std::string &path) {
    py::dict d;
    d["program"] = serialize(a.program);
    d["gflops"] = a.entry.gflops;
    d["base_gflops"] = a.entry.start_gflops;
    d["speedup"] = a.entry.start_gflops > 0 ? a.entry.gflops / a.entry.start_gflops : 0.0;
    d["best_actions"] = a.entry.actions;
    d["verified"] = a.entry.verified;
    d["tuned_at"] = a.entry.timestamp;
    d["from_library"] = true;
    d["library"] = path;
    return d;
}

py::dict py_tune(const std::optional<std::string> &benchmark, std::optional<std::string> policy,
                 std::optional<std::string> store, double budget_s, bool greedy,
                 const std::optional<std::vector<int64_t>> &matmul,
                 const std::optional<std::vector<int64_t>> &conv,
                 const std::optional<std::string> &library, bool retune, int threads) {
    if (threads < 0)
        throw Error(
            fmt::format("tune: threads={}: give 1 or more (0: every usable core)", threads));
    threads = looptune::resolve_threads(threads);
    const Program start = tune_start(benchmark, matmul, conv);
    py::gil_scoped_release release;
    std::string warning;  // the default library could not be opened: tuned without it
    auto lib = looptune::open_tune_library(library.value_or(""), store.value_or(""), &warning);
    const std::string machine = lib ? looptune::library_machine(threads) : "";
    if (lib && !retune)
        if (const auto a = looptune::library_answer(*lib, machine, start)) {
            py::gil_scoped_acquire acquire;
            return library_answer_dict(*a, lib->path());
        }
    const std::string path = policy.value_or(looptune::default_policy_path(threads));
    looptune::Policy pol = looptune::Policy::load(path);
    looptune::EnvConfig base;
    base.store_path = store.value_or("");
    base.threads = threads;
    Environment env(pol.env_config(base));
    looptune::GuidedConfig g;
    g.budget_s = budget_s;
    g.greedy = greedy;
    looptune::GuidedResult r = looptune::guided_search(pol, env, start, g);
    const std::string filed =
        lib ? looptune::verify_and_file(*lib, machine, env, start, r, LOOPTUNE_VERSION) : "";
    py::gil_scoped_acquire acquire;
    py::dict d = result_dict(r);
    d["policy"] = path;
    d["from_library"] = false;
    if (!warning.empty()) d["library_warning"] = warning;
    if (lib) {
        d["library"] = lib->path();
        d["filed"] = filed;
    }
    return d;
}

}  // namespace

void bind_tune(py::module_ &m) {
    m.def("tune", &py_tune, py::arg("benchmark") = py::none(), py::arg("policy") = py::none(),
          py::arg("store") = py::none(), py::arg("budget_s") = looptune::GuidedConfig{}.budget_s,
          py::arg("greedy") = false, py::arg("matmul") = py::none(), py::arg("conv") = py::none(),
          py::arg("library") = py::none(), py::arg("retune") = false, py::arg("threads") = 0);
}
