// Helpers shared by the tests: small programs, random legal action sequences, and a JIT kernel
// checked against the reference.
#pragma once

#include <sys/wait.h>
#include <cstdint>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "looptool/actions/actions.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/ir.h"
#include "looptool/ir/loop_tree.h"
#include "looptool/jit/jit.h"
#include "search/tile_schedules.h"

namespace looptool::tests {

// Runs the kernel twice on buffers whose non-input tensors start as NaN (so every element
// it must write or zero is checked, and a reduction it forgets to re-zero shows up on the
// second run) and compares each result with the reference.
inline ::testing::AssertionResult matches_reference(Jit &jit, const Program &p, uint64_t seed = 7) {
    const Computation &c = p.computation();
    Buffers got = make_buffers(c, seed);
    const Reference want = compute_reference(c, got);
    fill_non_inputs(c, got, std::numeric_limits<float>::quiet_NaN());
    Kernel k;
    try {
        k = jit.compile(p);
    } catch (const std::exception &e) {
        return ::testing::AssertionFailure() << "compile failed: " << e.what() << "\n"
                                             << dump(p, false);
    }
    const int32_t cancel = 0;
    auto ptrs = got.pointers();
    for (int run = 0; run < 2; ++run) {
        k.fn(ptrs.data(), &cancel);
        Comparison cmp = compare_outputs(c, want, got);
        if (!cmp.ok)
            return ::testing::AssertionFailure()
                   << "run " << run << ": " << cmp.first_mismatch << "\n"
                   << dump(p, false);
    }
    return ::testing::AssertionSuccess();
}

/// One JIT for a test binary's kernels (creating one per test costs ~10 ms).
inline Jit &shared_jit() {
    static std::unique_ptr<Jit> jit = Jit::create();
    return *jit;
}

/// About `n` of LoopTune's matmul and conv benchmarks under `corpus`, evenly spaced in sorted
/// order.
inline std::vector<std::string> corpus_sample(const std::filesystem::path &corpus, size_t n) {
    std::vector<std::string> all;
    for (const char *folder : {"mm64_256_16_range", "conv"})
        for (const auto &e : std::filesystem::directory_iterator(corpus / folder))
            all.push_back(e.path());
    std::sort(all.begin(), all.end());
    std::vector<std::string> out;
    for (size_t i = 0; i < all.size(); i += std::max<size_t>(1, all.size() / n))
        out.push_back(all[i]);
    return out;
}

/// The naive program of `c`.
inline Program naive_of(const Computation &c) {
    return Program::naive(std::make_shared<const Computation>(c));
}

/// `p` after each of `actions` in turn.
inline Program apply_all(Program p, const std::vector<Action> &actions) {
    for (Action a : actions) p = apply(p, a);
    return p;
}

/// `p` with the cursor on loop `depth` of nest `nest`.
inline Program at(Program p, int nest, int depth) {
    p.cursor = p.tree.flat({nest, depth});
    return p;
}

inline Program matmul_program(int64_t m, int64_t n, int64_t k) {
    return Program::naive(std::make_shared<Computation>(make_matmul(m, n, k)));
}

/// The naive nest of an m x n x k matmul scheduled as the `tile` family member `s`.
inline Program tiled_matmul(int64_t m, int64_t n, int64_t k, const looptune::TileSchedule &s) {
    Program p = matmul_program(m, n, k);
    for (Action a : looptune::tile_actions(p.computation(), s)) p = apply(p, a);
    return p;
}

/// Applies up to `max_len` random legal actions of `space` (at least 1 when any is legal);
/// the actions taken are appended to `taken` when it is given.
inline Program random_walk(Program p, std::mt19937_64 &rng, int max_len,
                           const ActionSpace &space = ActionSpace::preset("full"),
                           std::vector<Action> *taken = nullptr) {
    int len = std::uniform_int_distribution<int>(1, max_len)(rng);
    for (int i = 0; i < len; ++i) {
        std::vector<Action> legal;
        for (Action a : space.actions)
            if (is_legal(p, a)) legal.push_back(a);
        if (legal.empty()) break;
        Action a = legal[std::uniform_int_distribution<size_t>(0, legal.size() - 1)(rng)];
        p = apply(p, a);
        if (taken) taken->push_back(a);
    }
    return p;
}

/// Extents the property tests draw from: powers of two and awkward non-multiples.
inline const std::vector<int64_t> &awkward_extents() {
    static const std::vector<int64_t> v{1, 2, 3, 4, 7, 8, 16, 17, 31, 32, 37, 64, 100, 129};
    return v;
}

/// A random matmul whose m*n*k stays at or below `max_volume`, so the interpreter stays fast.
inline Program random_matmul(std::mt19937_64 &rng, int64_t max_volume) {
    const auto &ext = awkward_extents();
    std::uniform_int_distribution<size_t> pick(0, ext.size() - 1);
    for (;;) {
        int64_t m = ext[pick(rng)], n = ext[pick(rng)], k = ext[pick(rng)];
        if (m * n * k <= max_volume) return matmul_program(m, n, k);
    }
}

/// A fresh, empty directory under the system temp dir, removed by the destructor.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string &tag) {
        std::random_device rd;
        path = std::filesystem::temp_directory_path() /
               ("looptool_" + tag + "_" + std::to_string(rd()) + std::to_string(rd()));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string operator/(const std::string &name) const { return (path / name).string(); }
};

/// A run of the built `looptool` binary (LOOPTOOL_CLI).
struct RunResult {
    int exit_code = -1;  // -1 when killed by a signal
    std::string out, err;
};

inline std::string slurp(const std::filesystem::path &p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write(const TempDir &dir, const std::string &name, const std::string &text) {
    std::ofstream(dir.path / name, std::ios::binary) << text;
}

/// Runs `program ARGS` in `dir` with no stdin, and no schedule library unless ARGS name one
/// (`tune` would otherwise answer a test's shape from an earlier run's results).
inline RunResult run_program(const TempDir &dir, const std::string &program,
                             const std::string &args) {
    const std::string cmd = "cd '" + dir.path.string() + "' && LOOPTUNE_LIBRARY=off exec '" +
                            program + "' " + args + " >.stdout 2>.stderr </dev/null";
    int status = std::system(cmd.c_str());
    RunResult r;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    r.out = slurp(dir.path / ".stdout");
    r.err = slurp(dir.path / ".stderr");
    std::filesystem::remove(dir.path / ".stdout");
    std::filesystem::remove(dir.path / ".stderr");
    return r;
}

/// ARGS of a `looptool` subcommand that takes --threads, with `--threads 1` after the
/// subcommand unless ARGS give --threads: the tests' schedules, figures and store keys then do
/// not depend on the cores the machine has (the default is every usable core).
inline std::string single_thread(const std::string &args) {
    if (args.find("--threads") != std::string::npos) return args;
    for (const char *c : {"read ", "search ", "validate ", "tune ", "compare ", "train ", "export ",
                          "lib build "}) {
        const std::string cmd = c;
        if (args.rfind(cmd, 0) == 0) return cmd + "--threads 1 " + args.substr(cmd.size());
    }
    return args;
}

#ifdef LOOPTOOL_CLI
/// Runs `looptool ARGS` in `dir` with no stdin, on one thread (single_thread()).
inline RunResult run_cli(const TempDir &dir, const std::string &args) {
    return run_program(dir, LOOPTOOL_CLI, single_thread(args));
}
#endif

}  // namespace looptool::tests
