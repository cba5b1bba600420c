#include "lib/kernel_library.h"

#include <fmt/format.h>

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "lib/dispatch_source.h"
#include "lib/toolchain.h"
#include "looptool/formats/temp_file.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/export.h"

namespace looptune {
namespace fs = std::filesystem;
using looptool::Error;

namespace {

const char *const kFiles[] = {"liblooptune_kernels.so", "liblooptune_kernels.a",
                              "looptune_kernels.h", "looptune_kernels.json"};
constexpr const char *kBlockFunction = "lt_block_sgemm";

/// The element counts of a kind's inputs (in order) and output, as the dispatch passes them.
std::vector<int64_t> expected_elements(const std::string &kind, const std::vector<int64_t> &s) {
    if (kind == "matmul" && s.size() == 3) return {s[0] * s[2], s[2] * s[1], s[0] * s[1]};
    if (kind == "conv2d" && (s.size() == 7 || s.size() == 9)) {
        const int64_t stride = s.size() == 9 ? s[7] : 1, pad = s.size() == 9 ? s[8] : 0;
        if (stride < 1 || pad < 0) return {};
        return {s[0] * s[1] * s[2] * s[3], s[4] * s[1] * s[5] * s[6],
                s[0] * s[4] * ((s[2] + 2 * pad - s[5]) / stride + 1) *
                    ((s[3] + 2 * pad - s[6]) / stride + 1)};
    }
    return {};
}

/// "const float *A, const float *B, float *C" and the element counts in that order.
std::string c_params(const looptool::Computation &c, std::vector<int64_t> &elements) {
    std::string params;
    for (looptool::TensorKind kind : {looptool::TensorKind::Input, looptool::TensorKind::Output})
        for (const looptool::Tensor &t : c.tensors)
            if (t.kind == kind) {
                params += fmt::format("{}{}float *{}", params.empty() ? "" : ", ",
                                      kind == looptool::TensorKind::Input ? "const " : "",
                                      looptool::c_identifier(t.name));
                elements.push_back(t.num_elements());
            }
    return params;
}

std::string shape_text(const std::vector<int64_t> &shape) {
    std::string s;
    for (int64_t d : shape) s += fmt::format("{}{}", s.empty() ? "" : "x", d);
    return s;
}

/// A directory inside `out` holding the files while they are made; removed with what is left.
struct Staging {
    fs::path dir;
    explicit Staging(const std::string &out) {
        std::error_code ec;
        fs::create_directories(out, ec);
        if (!fs::is_directory(out))
            throw Error(fmt::format("{}: cannot create the directory", out));
        std::string tmpl = (fs::path(out) / ".lt-build-XXXXXX").string();
        if (!::mkdtemp(tmpl.data()))
            throw Error(fmt::format("{}: cannot create a staging directory ({})", out,
                                    std::strerror(errno)));
        dir = tmpl;
    }
    ~Staging() {
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    std::string path(const std::string &name) const { return (dir / name).string(); }
    void write(const std::string &name, const std::string &content) const {
        looptool::write_file_atomically(path(name), content);
    }
};

nlohmann::json entry_json(const LibraryEntry &e, const std::string &function) {
    return {{"name", e.name},       {"function", function}, {"kind", e.kind},
            {"shape", e.shape},     {"gflops", e.gflops},   {"verified", e.verified},
            {"machine", e.machine}, {"actions", e.actions}, {"computation", e.computation},
            {"version", e.version}, {"program", e.program}};
}

/// Moves the staged files into `out`; a failed rename removes the ones moved before it.
std::vector<std::string> publish(const Staging &st, const std::string &out) {
    std::vector<std::string> finals;
    for (const char *f : kFiles) {
        finals.push_back((fs::path(out) / f).string());
        if (fs::is_directory(fs::symlink_status(finals.back())))
            throw Error(fmt::format("{}: is a directory; nothing written", finals.back()));
    }
    for (size_t i = 0; i < finals.size(); ++i)
        if (std::rename(st.path(kFiles[i]).c_str(), finals[i].c_str()) != 0) {
            const std::string why = std::strerror(errno);
            std::error_code ec;
            for (size_t j = 0; j < i; ++j) fs::remove(finals[j], ec);
            throw Error(
                fmt::format("{}: cannot rename the new file to it ({}); the files "
                            "renamed before it were removed",
                            finals[i], why));
        }
    return finals;
}

struct Compiled {
    std::vector<DispatchKernel> dispatch;
    std::vector<std::string> objects;
    bool parallel = false;  ///< a kernel calls looptool_threads.c's pool
};

/// Exports one entry's program as `function` into the staging directory.
void compile_entry(const LibraryEntry &e, const std::string &function, const std::string &kind,
                   const KernelLibraryOptions &options, const Staging &st, KernelLibrary &lib,
                   Compiled &out) {
    const looptool::Program p =
        looptool::parse_program(e.program, fmt::format("the library's program of {}", e.name));
    std::vector<int64_t> elements;
    const std::string params = c_params(p.computation(), elements);
    const std::vector<int64_t> want = expected_elements(kind == "block" ? "matmul" : kind, e.shape);
    if ((kind == "matmul" || kind == "conv2d" || kind == "block") && elements != want)
        throw Error(
            fmt::format("the library's {} '{}' ({}) does not have that kind's two inputs "
                        "and output of shape {}",
                        kind, e.name, e.computation, shape_text(e.shape)));
    // Below 64 bytes, the dispatch's kernels come twice: lowered for any such pointer, and as the
    // JIT lowers them, for when every pointer is 64-byte aligned (aligned vector accesses,
    // prefetches planned on whole lines: up to 7% faster).
    const bool twice = options.align < 64 && kind != "block";
    const std::string aligned = twice ? aligned_function_name(function) : "";
    for (const auto &[name, align] : {std::pair{function, options.align}, std::pair{aligned, 64}}) {
        if (name.empty()) continue;
        looptool::ExportOptions eo;
        eo.name = name;
        eo.cpu = options.cpu;
        eo.lower.threads = options.threads;
        eo.lower.buffer_align = align;
        const looptool::ExportedKernel k = looptool::export_kernel(p, eo);
        out.parallel = out.parallel || !k.runtime.empty();
        lib.cpu = k.cpu;
        lib.triple = k.triple;
        st.write(name + ".o", k.object);
        out.objects.push_back(st.path(name + ".o"));
    }
    const std::string what = kind == "block" ? "block kernel of lt_sgemm" : kind;
    out.dispatch.push_back({function, kind, e.shape, params,
                            fmt::format("{} {} {} ({}, {:.1f} GFLOPS as tuned{})", function,
                                        what.empty() ? "kernel" : what, shape_text(e.shape), e.name,
                                        e.gflops, e.verified ? ", verified" : ""),
                            aligned});
}

}  // namespace

KernelLibrary build_kernel_library(const std::vector<LibraryEntry> &entries,
                                   const KernelLibraryOptions &options) {
    if (entries.empty()) throw Error("lib build: no kernels to build a library from");
    for (int64_t b : options.block)
        if (b < 1 || b > 4096)
            throw Error(fmt::format("lib build: block sizes must be 1..4096, not {}", b));
    if (options.align != 4 && options.align != 64)
        throw Error(fmt::format("lib build: the alignment must be 4 or 64, not {}", options.align));
    const Toolchain tools = find_toolchain(options.cc, options.ar);
    KernelLibrary lib;
    lib.block = block_kernel_entry(entries, options.block, lib.block_source);
    Staging st(options.out);
    Compiled compiled;
    std::set<std::string> used = {"lt_sgemm", "lt_sconv2d", "lt_sconv2d_ex", "lt_library_info",
                                  kBlockFunction};
    for (const LibraryEntry &e : entries) {
        const std::string base = "lt_" + looptool::c_identifier(e.name);
        std::string function = base;
        for (int i = 2; used.count(function) || used.count(aligned_function_name(function)); ++i)
            function = fmt::format("{}_{}", base, i);
        used.insert(function);
        used.insert(aligned_function_name(function));
        compile_entry(e, function, e.kind, options, st, lib, compiled);
        lib.kernels.push_back({function, e});
    }
    compile_entry(lib.block, kBlockFunction, "block", options, st, lib, compiled);

    nlohmann::json manifest = {{"machine", options.machine},
                               {"cpu", lib.cpu},
                               {"triple", lib.triple},
                               {"alignment", options.align},
                               {"block", entry_json(lib.block, kBlockFunction)},
                               {"block_source", lib.block_source},
                               {"kernels", nlohmann::json::array()}};
    for (const LibraryKernel &k : lib.kernels)
        manifest["kernels"].push_back(entry_json(k.entry, k.function));
    const std::string manifest_text = manifest.dump(2) + "\n";
    st.write("looptune_kernels.h", library_header(compiled.dispatch, options.machine, lib.cpu,
                                                  lib.triple, options.block, options.align));
    st.write("looptune_kernels.json", manifest_text);
    st.write("dispatch.c", dispatch_source(compiled.dispatch, kBlockFunction, options.block,
                                           manifest_text, options.align));
    if (compiled.parallel) st.write("looptool_threads.c", looptool::exported_threads_runtime());
    link_library(tools, st.dir.string(), compiled.objects, options.cpu.empty(), compiled.parallel);
    lib.files = publish(st, options.out);
    return lib;
}

}  // namespace looptune
