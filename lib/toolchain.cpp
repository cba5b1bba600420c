#include "lib/toolchain.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

namespace looptune {
namespace fs = std::filesystem;
using looptool::Error;

namespace {

std::vector<std::string> words(const std::string &text) {
    std::istringstream in(text);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

/// The program's path: itself when it names a path, else the first match on PATH; "" if none.
std::string find_program(const std::string &name) {
    if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
    const char *path = std::getenv("PATH");
    std::istringstream dirs(path ? path : "/usr/bin:/bin");
    for (std::string d; std::getline(dirs, d, ':');) {
        const fs::path p = fs::path(d.empty() ? "." : d) / name;
        if (::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p.string();
    }
    return "";
}

std::string pick(const std::string &given, const char *env, const char *fallback) {
    if (!given.empty()) return given;
    const char *e = std::getenv(env);
    return e && *e ? e : fallback;
}

/// Runs argv with its output into `log`; throws Error naming the command when it fails.
void run(const std::vector<std::string> &argv, const std::string &log) {
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(fmt::format("lib build: cannot start {}", argv[0]));
    if (pid == 0) {
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            ::dup2(fd, 1);
            ::dup2(fd, 2);
        }
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    std::string cmd, output;
    for (const std::string &a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    try {
        output = looptool::read_file(log).substr(0, 600);
    } catch (const Error &) {}
    throw Error(fmt::format("lib build: `{}` failed ({}){}{}", cmd,
                            WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
                                              : std::string("killed by a signal"),
                            output.empty() ? "" : ": ", output));
}

}  // namespace

Toolchain find_toolchain(const std::string &cc, const std::string &ar) {
    Toolchain t;
    t.cc = words(pick(cc, "CC", "cc"));
    const std::string cc_path = t.cc.empty() ? "" : find_program(t.cc[0]);
    if (cc_path.empty())
        throw Error(fmt::format(
            "lib build: no C compiler: `{}` is not on PATH (install gcc or clang, or set CC); "
            "it compiles the dispatch and links the shared library",
            t.cc.empty() ? std::string() : t.cc[0]));
    t.cc[0] = cc_path;
    const std::string ar_name = pick(ar, "AR", "ar");
    t.ar = find_program(ar_name);
    if (t.ar.empty())
        throw Error(
            fmt::format("lib build: no archiver: `{}` is not on PATH (install binutils, "
                        "or set AR); it writes the static library",
                        ar_name));
    return t;
}

void link_library(const Toolchain &tools, const std::string &dir, std::vector<std::string> objects,
                  bool native, bool threads) {
    const std::string d = dir + "/", log = d + "tool.log";
    std::vector<std::string> cc = tools.cc;
    for (const char *flag : {"-std=c11", "-O3", "-fPIC", "-c"}) cc.push_back(flag);
    if (native) cc.push_back("-march=native");
    if (threads) {
        // The pool is the library's own: its symbols stay out of the .so's interface.
        std::vector<std::string> pool = cc;
        for (const std::string &a :
             {std::string("-pthread"), std::string("-fvisibility=hidden"), d + "looptool_threads.c",
              std::string("-o"), d + "looptool_threads.o"})
            pool.push_back(a);
        run(pool, log);
        objects.push_back(d + "looptool_threads.o");
    }
    for (const std::string &a : {d + "dispatch.c", std::string("-o"), d + "dispatch.o"})
        cc.push_back(a);
    run(cc, log);
    std::vector<std::string> so = tools.cc;
    for (const std::string &a : {std::string("-shared"), std::string("-o"),
                                 d + "liblooptune_kernels.so", d + "dispatch.o"})
        so.push_back(a);
    so.insert(so.end(), objects.begin(), objects.end());
    // A kernel with exp/log/tanh/erf on vectors calls glibc's libmvec (lower_math.h).
    for (const char *l : {"-lmvec", "-lm"}) so.push_back(l);
    if (threads) so.push_back("-pthread");
    run(so, log);
    std::vector<std::string> a = {tools.ar, "rcs", d + "liblooptune_kernels.a", d + "dispatch.o"};
    a.insert(a.end(), objects.begin(), objects.end());
    run(a, log);
}

}  // namespace looptune
