#include "experiments/slurm/sbatch.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

extern char **environ;

namespace looptune::slurm {

using looptool::Error;

namespace {

// Characters that an #SBATCH line or a Slurm filename pattern would misread: whitespace
// splits the line, quotes are kept literally, '%' starts a filename pattern such as %j.
bool sbatch_safe(const std::string &s) {
    for (unsigned char ch : s)
        if (std::isspace(ch) || ch == '%' || ch == '"' || ch == '\'' || ch == '\\' || ch < 0x20)
            return false;
    return true;
}

void check_path(const char *what, const std::string &p) {
    if (p.empty()) throw Error(fmt::format("slurm: {} is required", what));
    if (p.front() != '/')
        throw Error(fmt::format("slurm: {} '{}' must be an absolute path", what, p));
    if (!sbatch_safe(p))
        throw Error(
            fmt::format("slurm: {} '{}' contains whitespace, a quote, a backslash or '%', "
                        "which an #SBATCH line cannot hold",
                        what, p));
}

// Searches PATH the way execvp would; empty when not found.
std::string find_on_path(const std::string &name) {
    const char *path = std::getenv("PATH");
    std::string dirs = path ? path : "";
    size_t start = 0;
    for (;;) {
        size_t end = dirs.find(':', start);
        std::string dir =
            dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (dir.empty()) dir = ".";
        std::string cand = dir + "/" + name;
        if (::access(cand.c_str(), X_OK) == 0 && !std::filesystem::is_directory(cand)) return cand;
        if (end == std::string::npos) return "";
        start = end + 1;
    }
}

}  // namespace

int total_tasks(const SbatchConfig &c) { return c.nodes * c.ntasks_per_node; }

void validate(const SbatchConfig &c) {
    auto positive = [](const char *name, int v) {
        if (v < 1) throw Error(fmt::format("slurm: {} must be a positive count, got {}", name, v));
    };
    positive("--nodes", c.nodes);
    positive("--ntasks-per-node", c.ntasks_per_node);
    positive("--cpus-per-task", c.cpus_per_task);
    static const std::regex time_re(R"(^(?:(\d+)-)?(\d+):(\d\d):(\d\d)$)");
    std::smatch m;
    if (!std::regex_match(c.time, m, time_re))
        throw Error(fmt::format("slurm: --time '{}' is not HH:MM:SS or D-HH:MM:SS", c.time));
    const int mins = std::stoi(m[3].str()), secs = std::stoi(m[4].str());
    if (mins > 59 || secs > 59)
        throw Error(
            fmt::format("slurm: --time '{}': minutes and seconds must be below 60", c.time));
    if (m[2].str().size() > 6) throw Error(fmt::format("slurm: --time '{}' is too long", c.time));
    const long long days = m[1].matched ? std::stoll(m[1].str()) : 0,
                    hours = std::stoll(m[2].str());
    if (days == 0 && hours == 0 && mins == 0 && secs == 0)
        throw Error(fmt::format("slurm: --time '{}' is zero", c.time));
    static const std::regex mem_re(R"(^[1-9]\d*[KMGT]?$)");
    if (!c.mem.empty() && !std::regex_match(c.mem, mem_re))
        throw Error(fmt::format("slurm: --mem '{}' is not a size such as 4096 or 4G", c.mem));
    static const std::regex name_re(R"(^[A-Za-z0-9_.+-]+$)");
    if (!c.partition.empty() && !std::regex_match(c.partition, name_re))
        throw Error(
            fmt::format("slurm: --partition '{}' must be letters, digits and _.+-", c.partition));
    if (!std::regex_match(c.mpi, name_re))
        throw Error(
            fmt::format("slurm: --mpi '{}' must be a plugin name such as pmix or pmi2", c.mpi));
    if (!std::regex_match(c.job_name, name_re))
        throw Error(fmt::format("slurm: --job-name '{}' must be non-empty letters, digits and _.+-",
                                c.job_name));
    check_path("the run directory (--out)", c.run_dir);
    check_path("the working directory", c.workdir);
    check_path("the looptool binary", c.looptool);
    for (const auto &a : c.train_args) {
        for (const char *owned : {"--out", "--resume", "--distributed"}) {
            const std::string o = owned;
            if (a == o || a.rfind(o + "=", 0) == 0)
                throw Error(
                    fmt::format("slurm: '{}' among the train arguments: slurm-train sets "
                                "--out RUN_DIR --resume{} itself",
                                a, total_tasks(c) > 1 ? " --distributed mpi" : ""));
        }
        if (a.find('\n') != std::string::npos || a.find('\0') != std::string::npos)
            throw Error("slurm: a train argument contains a line break");
    }
}

std::string shell_quote(const std::string &s) {
    static const std::regex plain(R"(^[A-Za-z0-9_./:=,+@%-]+$)");
    if (std::regex_match(s, plain)) return s;
    std::string out = "'";
    for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return out + "'";
}

std::string script_path(const SbatchConfig &c) { return c.run_dir + "/train.sbatch"; }

std::string sbatch_script(const SbatchConfig &c) {
    validate(c);
    const bool distributed = total_tasks(c) > 1;
    std::string s;
    s += "#!/bin/bash\n";
    s += "# Written by `looptool slurm-train`. Requeue-safe: every start of this job (the first, "
         "after\n";
    s += "# `scontrol requeue`, or a resubmission of this file) runs the trainer with --resume, "
         "which\n";
    s += "# continues from the latest checkpoint in the run directory or starts fresh without "
         "one.\n";
    s += fmt::format("#SBATCH --job-name={}\n", c.job_name);
    s += fmt::format("#SBATCH --nodes={}\n", c.nodes);
    s += fmt::format("#SBATCH --ntasks-per-node={}\n", c.ntasks_per_node);
    s += fmt::format("#SBATCH --cpus-per-task={}\n", c.cpus_per_task);
    s += fmt::format("#SBATCH --time={}\n", c.time);
    if (!c.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", c.partition);
    if (!c.mem.empty()) s += fmt::format("#SBATCH --mem={}\n", c.mem);
    s += "#SBATCH --requeue\n";
    s += "#SBATCH --open-mode=append\n";
    s += fmt::format("#SBATCH --chdir={}\n", c.workdir);
    s += fmt::format("#SBATCH --output={}/slurm-%j.out\n", c.run_dir);
    s += "set -euo pipefail\n";
    s += "export OMP_NUM_THREADS=\"${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}\"\n";
    s += "echo \"== looptune slurm-train: job ${SLURM_JOB_ID:-none} start "
         "$((${SLURM_RESTART_COUNT:-0} + 1)) "
         "on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ)\"\n";
    std::string cmd = distributed ? fmt::format("srun --mpi={} ", c.mpi) : "srun ";
    cmd += shell_quote(c.looptool) + " train";
    for (const auto &a : c.train_args) cmd += " " + shell_quote(a);
    cmd += " --out " + shell_quote(c.run_dir) + " --resume";
    if (distributed) cmd += " --distributed mpi";
    const bool has_store = std::any_of(
        c.train_args.begin(), c.train_args.end(),
        [](const std::string &a) { return a == "--store" || a.rfind("--store=", 0) == 0; });
    if (c.nodes > 1 && !has_store) {
        // SQLite cannot be shared across hosts: each node keeps its own store in node-local
        // temporary space (the same job id after a requeue finds it again), and the trainer
        // merges them all into RUN_DIR/store.sqlite at the end.
        s += "# Each node's measurement store, merged into the run directory when training ends.\n";
        s += "NODE_STORE=\"${TMPDIR:-/tmp}/looptune-store-${SLURM_JOB_ID:-none}.sqlite\"\n";
        cmd += " --store \"$NODE_STORE\"";
    }
    s += cmd + "\n";
    return s;
}

std::string write_sbatch_script(const SbatchConfig &c) {
    const std::string text = sbatch_script(c);
    std::error_code ec;
    std::filesystem::create_directories(c.run_dir, ec);
    if (ec)
        throw Error(
            fmt::format("{}: cannot create the run directory: {}", c.run_dir, ec.message()));
    const std::string path = script_path(c);
    looptool::write_file_atomically(path, text);
    std::filesystem::permissions(
        path, std::filesystem::perms::owner_exec | std::filesystem::perms::group_exec,
        std::filesystem::perm_options::add, ec);
    return path;
}

std::string parse_job_id(const std::string &out) {
    static const std::regex re(R"(Submitted batch job (\d+))");
    std::smatch m;
    if (!std::regex_search(out, m, re))
        throw Error(fmt::format("sbatch: no 'Submitted batch job N' in its output: '{}'", out));
    return m[1].str();
}

std::string submit(const std::string &script) {
    const std::string sbatch = find_on_path("sbatch");
    if (sbatch.empty())
        throw Error(
            fmt::format("sbatch not found on PATH, so {} was written but not submitted; "
                        "install Slurm's client (Debian: slurm-client) or run on a login node",
                        script));
    int fds[2];
    if (::pipe(fds) != 0) throw Error(fmt::format("sbatch: pipe: {}", std::strerror(errno)));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char *> argv{const_cast<char *>(sbatch.c_str()), const_cast<char *>(script.c_str()),
                             nullptr};
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, sbatch.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        throw Error(fmt::format("{}: cannot start: {}", sbatch, std::strerror(rc)));
    }
    std::string out;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n > 0)
            out.append(buf, size_t(n));
        else if (n == 0 || errno != EINTR)
            break;
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        const std::string how = WIFEXITED(status)
                                    ? fmt::format("exit status {}", WEXITSTATUS(status))
                                    : fmt::format("signal {}", WTERMSIG(status));
        throw Error(
            fmt::format("sbatch {} failed ({}): {}", script, how, out.empty() ? "no output" : out));
    }
    return parse_job_id(out);
}

}  // namespace looptune::slurm
