// The `looptune._core` extension: a thin pybind11 binding over env/ and agents/. It adapts
// types only (C++ vectors to numpy arrays, results to tuples and dicts, looptool::Error to
// looptune.Error); python/looptune/__init__.py gives it Gymnasium's API shape. The GIL is
// released around everything that compiles or measures.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>

#include "env/dataset.h"
#include "env/environment.h"
#include "env/graph_observation.h"
#include "env/observation_bounds.h"
#include "env/observations.h"
#include "env/schedule_match.h"
#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/gen/canonical_form.h"
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "looptool/jit/export.h"
#include "python/kernel_call.h"
#include "python/numpy_alignment.h"
#include "python/tune_binding.h"
#include "tune/guided_search.h"
#include "util/threads.h"

namespace py = pybind11;
using namespace looptool;
using looptune::Environment;

namespace {

py::array_t<float> to_numpy(const looptune::Observation &o) {
    py::array_t<float> a(std::vector<py::ssize_t>(o.shape.begin(), o.shape.end()));
    std::copy(o.values.begin(), o.values.end(), a.mutable_data());
    return a;
}

/// int8, as Gymnasium's Discrete.sample(mask=) wants it.
py::array_t<int8_t> to_numpy(const std::vector<bool> &mask) {
    py::array_t<int8_t> a(py::ssize_t(mask.size()));
    int8_t *d = a.mutable_data();
    for (size_t i = 0; i < mask.size(); ++i) d[i] = mask[i];
    return a;
}

/// The program a benchmark file and an optional schedule (actions or a program file) give.
Program schedule_of(const std::string &benchmark, const std::optional<std::string> &actions,
                    const std::optional<std::string> &schedule) {
    Program p = load_program_file(benchmark);
    if (actions && schedule) throw Error("give actions or schedule, not both");
    if (schedule) {
        Program s = load_program_file(*schedule);
        looptune::check_schedule_of(p, benchmark, s, *schedule);
        return s;
    }
    if (actions)
        for (Action a : parse_action_list(*actions)) p = apply(p, a);
    return p;
}

}  // namespace

Program tune_start(const std::optional<std::string> &benchmark,
                   const std::optional<std::vector<int64_t>> &matmul,
                   const std::optional<std::vector<int64_t>> &conv, const char *who) {
    if (int(benchmark.has_value()) + int(matmul.has_value()) + int(conv.has_value()) != 1)
        throw Error(
            fmt::format("{}: give exactly one of benchmark, matmul=(M, N, K), bmm=(B, M, N, K) or "
                        "conv=(N, CI, H, W, CO, KH, KW)",
                        who));
    if (benchmark) return looptool::tuning_start(load_program_file(*benchmark));
    return Program::naive(std::make_shared<const looptool::Computation>(
        looptool::computation_of_shape(who, matmul ? "matmul" : "conv", matmul ? *matmul : *conv)));
}

namespace {

/// How an episode ends; step() refuses to go on until reset().
enum class Ended { No, Terminated, Truncated };

/// The environment core: one Environment plus the benchmarks an episode is drawn from (the
/// Python side draws, with the env's np_random).
class Core {
public:
    struct Options {
        std::string illegal_action = "raise";  ///< or "penalty"
        double penalty = -1.0;
        bool graph = false;
    };

    Core(std::optional<std::string> benchmark, std::optional<std::string> dataset,
         const std::string &split, std::optional<std::vector<int64_t>> matmul,
         std::optional<std::vector<int64_t>> conv, const looptune::EnvConfig &cfg, Options options)
        : options_(std::move(options)) {
        if (options_.illegal_action != "raise" && options_.illegal_action != "penalty")
            throw Error(fmt::format("illegal_action must be \"raise\" or \"penalty\", not \"{}\"",
                                    options_.illegal_action));
        if (!(options_.penalty < 0) || !std::isfinite(options_.penalty))
            throw Error(fmt::format("illegal_penalty must be a finite negative reward, not {}",
                                    options_.penalty));
        if (int(benchmark.has_value()) + int(dataset.has_value()) + int(matmul.has_value()) +
                int(conv.has_value()) !=
            1)
            throw Error("give exactly one of benchmark=, dataset=, matmul= or conv=");
        if (benchmark) {
            load_program_file(*benchmark);  // a bad file fails here, not at reset()
            files_ = {*benchmark};
        } else if (dataset) {
            files_ = looptune::Dataset::load(*dataset).files(looptune::parse_split(split));
            if (files_.empty())
                throw Error(fmt::format("{}: the {} split is empty", *dataset, split));
        } else {
            start_ = tune_start(std::nullopt, matmul, conv, "LoopToolEnv");
        }
        py::gil_scoped_release release;
        env_ = std::make_unique<Environment>(cfg);
    }

    /// Held by every call that reads or changes the environment. Not waited for: a second thread
    /// using the same env at once gets an error (the JIT and the episode are not thread-safe,
    /// and waiting with the GIL held could deadlock).
    class Use {
    public:
        Use(Core &c, bool needs_reset) : lock_(c.mu_, std::try_to_lock) {
            if (!lock_.owns_lock())
                throw Error(
                    "this environment is in use by another thread; give each thread its own "
                    "LoopToolEnv");
            if (needs_reset && !c.started_) throw Error("call reset() first");
        }

    private:
        std::unique_lock<std::mutex> lock_;
    };

    /// `benchmark`: the file to start from (one of files_ unless given by the caller); none for
    /// a computation given by its shape.
    py::tuple reset(std::optional<std::string> benchmark) {
        Use use(*this, false);
        if (!benchmark && !start_) throw Error("reset(): no benchmark to start from");
        {
            py::gil_scoped_release release;
            if (benchmark)
                env_->reset(*benchmark);
            else
                env_->reset(*start_);
        }
        started_ = true;
        steps_ = 0;
        ended_ = Ended::No;
        py::dict info = info_dict(env_->action_mask(), nullptr);
        info["benchmark"] = benchmark ? *benchmark : env_->program().comp->name;
        return py::make_tuple(observation_locked(), info);
    }

    py::tuple step(int action) {
        Use use(*this, true);
        switch (ended_) {
            case Ended::No: break;
            case Ended::Terminated:
                throw Error(
                    "the episode has terminated (no action is legal); call reset() for a new one");
            case Ended::Truncated:
                throw Error(
                    fmt::format("the episode was truncated after max_steps={} steps; call reset() "
                                "for a new one",
                                env_->config().max_steps));
        }
        const auto &actions = env_->action_space().actions;
        if (options_.illegal_action == "penalty" && action >= 0 && size_t(action) < actions.size())
            if (const char *why = why_illegal(env_->program(), actions[size_t(action)]))
                return finish_step(options_.penalty, nullptr, why);
        looptune::StepResult r;
        {
            py::gil_scoped_release release;
            r = env_->step_index(action);  // throws for an illegal action or a bad index
        }
        return finish_step(r.reward, &r.info, nullptr);
    }

    /// The step's result; `illegal`: why the action was refused (the state is unchanged).
    py::tuple finish_step(double reward, const looptune::StepInfo *s, const char *illegal) {
        ++steps_;  // refused actions count too: an agent repeating one still reaches max_steps
        const std::vector<bool> mask = env_->action_mask();
        // Truncated at the step limit; terminated when no action is legal any more.
        const bool terminated = std::find(mask.begin(), mask.end(), true) == mask.end();
        const bool truncated = !terminated && steps_ >= env_->config().max_steps;
        ended_ = terminated ? Ended::Terminated : truncated ? Ended::Truncated : Ended::No;
        py::dict info = info_dict(mask, s);
        info["illegal_action"] = illegal != nullptr;
        if (illegal) info["illegal_reason"] = std::string(illegal);
        return py::make_tuple(observation_locked(), reward, terminated, truncated, info);
    }

    py::array_t<int8_t> action_mask() {
        Use use(*this, true);
        return to_numpy(env_->action_mask());
    }

    py::dict observation() {
        Use use(*this, true);
        return observation_locked();
    }

    /// Runs f(env) while this thread holds the environment, after reset().
    template <class F>
    auto with_env(F &&f) {
        Use use(*this, true);
        return f(*env_);
    }

    py::dict observation_locked() const {
        py::dict obs;
        obs["loops_tensor"] = to_numpy(env_->observe("loops_tensor"));
        obs["stride_tensor"] = to_numpy(env_->observe("stride_tensor"));
        obs["prev_actions_tensor"] = to_numpy(env_->observe("prev_actions_tensor"));
        obs["machine_tensor"] = to_numpy(env_->observe("machine_tensor"));
        if (options_.graph) {
            const looptune::DenseGraph g = looptune::to_dense(
                looptune::loop_tree_graph(env_->program()), env_->machine_vector());
            py::array_t<float> nodes(
                {py::ssize_t(g.num_vertices), py::ssize_t(looptune::kGraphVertexFeatures)});
            std::copy(g.features.begin(), g.features.end(), nodes.mutable_data());
            py::array_t<int64_t> edges({py::ssize_t(g.edges.size()), py::ssize_t(2)});
            int64_t *e = edges.mutable_data();
            for (size_t i = 0; i < g.edges.size(); ++i) {
                e[2 * i] = g.edges[i].first;
                e[2 * i + 1] = g.edges[i].second;
            }
            obs["graph_nodes"] = nodes;
            obs["graph_edges"] = edges;
            py::array_t<float> globals(py::ssize_t(g.graph_features.size()));
            std::copy(g.graph_features.begin(), g.graph_features.end(), globals.mutable_data());
            obs["graph_features"] = globals;
        }
        return obs;
    }

    py::dict info_dict(const std::vector<bool> &mask, const looptune::StepInfo *s) const {
        py::dict info;
        info["action_mask"] = to_numpy(mask);
        info["gflops"] = env_->gflops();
        info["step"] = steps_;
        if (s) {
            info["measured"] = s->measured;
            info["from_cache"] = s->from_cache;
            info["compile_ms"] = s->compile_ms;
            info["timed_out"] = s->timed_out;
        }
        return info;
    }

    std::vector<std::string> action_names() const {
        return looptool::action_names(env_->action_space().actions);
    }

    const looptune::EnvConfig &config() const { return env_->config(); }
    double max_gflops() const { return env_->max_gflops(); }
    const std::vector<std::string> &files() const { return files_; }
    bool graph() const { return options_.graph; }

private:
    Options options_;
    std::mutex mu_;
    bool started_ = false;
    int steps_ = 0;  ///< actions taken this episode, refused ones included
    Ended ended_ = Ended::No;
    std::unique_ptr<Environment> env_;
    std::vector<std::string> files_;
    std::optional<Program> start_;  ///< a computation given by its shape
};

}  // namespace

namespace {

void bind_core(py::module_ &m) {
    py::class_<Core>(m, "Core")
        .def(py::init([](std::optional<std::string> benchmark, std::optional<std::string> dataset,
                         const std::string &split, std::optional<std::vector<int64_t>> matmul,
                         std::optional<std::vector<int64_t>> conv, const std::string &action_space,
                         int max_steps, std::optional<std::string> store, int max_loops,
                         bool verify, bool measure, bool graph, const std::string &illegal_action,
                         double illegal_penalty, int threads) {
                 looptune::EnvConfig cfg;
                 cfg.threads = threads;
                 cfg.action_space = action_space;
                 cfg.max_steps = max_steps;
                 cfg.max_loops = max_loops;
                 cfg.store_path = store.value_or("");
                 cfg.verify = verify;
                 cfg.measure_enabled = measure;
                 return std::make_unique<Core>(
                     benchmark, dataset, split, matmul, conv, cfg,
                     Core::Options{illegal_action, illegal_penalty, graph});
             }),
             py::arg("benchmark"), py::arg("dataset"), py::arg("split"), py::arg("matmul"),
             py::arg("conv"), py::arg("action_space"), py::arg("max_steps"), py::arg("store"),
             py::arg("max_loops"), py::arg("verify"), py::arg("measure"), py::arg("graph"),
             py::arg("illegal_action"), py::arg("illegal_penalty"), py::arg("threads"))
        .def("reset", &Core::reset, py::arg("benchmark"))
        .def("step", &Core::step, py::arg("action"))
        .def("observation", &Core::observation)
        .def("action_mask", &Core::action_mask)
        .def("action_names", &Core::action_names)
        .def("benchmarks", &Core::files)
        // Fixed at construction: read without taking the environment.
        .def_property_readonly("max_loops", [](Core &c) { return c.config().max_loops; })
        .def_property_readonly("max_steps", [](Core &c) { return c.config().max_steps; })
        .def_property_readonly("max_gflops", [](Core &c) { return c.max_gflops(); })
        .def_property_readonly("threads", [](Core &c) { return c.config().threads; })
        .def_property_readonly(
            "gflops", [](Core &c) { return c.with_env([](Environment &e) { return e.gflops(); }); })
        .def_property_readonly("graph", &Core::graph)
        .def("program",
             [](Core &c) {
                 return c.with_env([](Environment &e) { return serialize(e.program()); });
             })
        .def("loop_tree",
             [](Core &c) { return c.with_env([](Environment &e) { return dump(e.program()); }); })
        .def("history",
             [](Core &c) {
                 return c.with_env([](Environment &e) { return action_names(e.history()); });
             })
        .def(
            "verify",
            [](Core &c, double tolerance) {
                const Comparison r = c.with_env([&](Environment &e) {
                    py::gil_scoped_release release;
                    return e.verify(e.program(), tolerance);
                });
                return py::make_tuple(r.ok, r.max_error_ratio);
            },
            py::arg("tolerance") = 1.0);
}

py::dict py_measure(const std::string &benchmark, std::optional<std::string> actions,
                    std::optional<std::string> schedule, bool verify, int threads) {
    py::gil_scoped_release release;
    const Program p = schedule_of(benchmark, actions, schedule);
    looptune::EnvConfig cfg;
    cfg.threads = threads;
    cfg.measure = MeasureOptions{};  // the full protocol of measure.h, not the env's short one
    Environment env(cfg);
    env.reset(p);
    std::optional<Comparison> check;
    if (verify) check = env.verify(p);
    py::gil_scoped_acquire acquire;
    py::dict d;
    d["gflops"] = env.gflops();
    d["runtime_s"] = env.runtime_s();
    d["fraction_of_peak"] = env.gflops() / env.max_gflops();
    d["program"] = serialize(p);
    if (check) {
        d["verified"] = check->ok;
        d["max_error_ratio"] = check->max_error_ratio;
    }
    return d;
}

py::dict py_export(const std::string &benchmark, const std::string &out,
                   std::optional<std::string> actions, std::optional<std::string> schedule,
                   std::optional<std::string> cpu, std::optional<std::string> name, int threads) {
    py::gil_scoped_release release;
    if (threads < 0)
        throw Error(
            fmt::format("export: threads={}: give 1 or more (0: every usable core)", threads));
    ExportOptions o;
    o.lower.threads = looptune::resolve_threads(threads);
    o.cpu = cpu.value_or("");
    o.name = name.value_or("");
    const ExportedKernel k = export_kernel(schedule_of(benchmark, actions, schedule), o);
    const std::vector<std::string> files = write_exported_kernel(k, out);
    py::gil_scoped_acquire acquire;
    py::dict d;
    d["function"] = k.name;
    d["cpu"] = k.cpu;
    d["files"] = files;
    d["threads"] = k.threads;
    return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "looptune's C++ core (use the looptune package, not this module)";
    m.attr("__version__") = LOOPTUNE_VERSION;
    static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const Error &e) {
            PyErr_SetString(error.ptr(), e.what());
        } catch (const InternalError &e) {
            PyErr_SetString(PyExc_AssertionError, e.what());
        }
    });

    m.attr("LOOP_FEATURES") = looptune::kLoopFeatures;
    m.attr("STRIDE_BUCKETS") = looptune::kStrideBuckets;
    m.attr("PREV_ACTIONS") = looptune::kPrevActions;
    m.attr("GRAPH_VERTEX_FEATURES") = looptune::kGraphVertexFeatures;
    m.attr("LOOP_FEATURE_HIGH") = looptune::loops_tensor_high();
    m.attr("MACHINE_FEATURES") = looptune::kMachineFeatures;
    m.attr("MACHINE_FEATURE_HIGH") = looptune::machine_tensor_high();

    bind_core(m);
    bind_tune(m);
    bind_kernel_calls(m);
    bind_numpy_alignment(m);
    m.def("measure", &py_measure, py::arg("benchmark"), py::arg("actions") = py::none(),
          py::arg("schedule") = py::none(), py::arg("verify") = true, py::arg("threads") = 0);
    m.def("export", &py_export, py::arg("benchmark"), py::arg("out"),
          py::arg("actions") = py::none(), py::arg("schedule") = py::none(),
          py::arg("cpu") = py::none(), py::arg("name") = py::none(), py::arg("threads") = 0);
    m.def("default_threads", &looptune::default_threads);
    m.def(
        "action_names",
        [](const std::string &space) { return action_names(ActionSpace::preset(space).actions); },
        py::arg("space") = "full");
}
