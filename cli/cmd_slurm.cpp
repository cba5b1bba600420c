#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "experiments/slurm/sbatch.h"
#include "looptool/ir/error.h"

namespace looptool::cli {

// The train arguments parsed as `train` will parse them (with the --out the script adds), so
// a typo fails here rather than in a job that waited in the queue. Nothing runs.
static void check_train_args(const std::vector<std::string> &args, const std::string &run_dir) {
    CLI::App parser;
    add_train(parser);
    std::vector<std::string> argv = {"looptool", "train"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--out", run_dir});
    std::vector<const char *> ptrs;
    for (const auto &a : argv) ptrs.push_back(a.c_str());
    try {
        parser.parse(int(ptrs.size()), ptrs.data());
    } catch (const CLI::ParseError &e) {
        throw Error(fmt::format("slurm-train: the train arguments: {}", e.what()));
    }
}

Run add_slurm_train(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "slurm-train",
        "Write a requeue-safe sbatch script for `looptool train` into RUN_DIR and submit it:\n"
        "  looptool slurm-train [options] --out RUN_DIR -- <train args>");
    struct Opts {
        looptune::slurm::SbatchConfig c;
        bool json = false, dry_run = false;
    };
    auto o = std::make_shared<Opts>();
    cmd->add_option("--nodes", o->c.nodes, "Nodes")->capture_default_str();
    cmd->add_option("--ntasks-per-node", o->c.ntasks_per_node, "Trainer processes per node")
        ->capture_default_str();
    cmd->add_option("--cpus-per-task", o->c.cpus_per_task, "CPUs per trainer process")
        ->capture_default_str();
    cmd->add_option("--time", o->c.time, "Time limit of one start, HH:MM:SS or D-HH:MM:SS")
        ->capture_default_str();
    cmd->add_option("--partition", o->c.partition, "Partition (default: the cluster's)");
    cmd->add_option("--job-name", o->c.job_name, "Job name")->capture_default_str();
    cmd->add_option("--mem", o->c.mem, "Memory per node, e.g. 4G (default: the cluster's)");
    cmd->add_option("--mpi", o->c.mpi,
                    "srun --mpi plugin when nodes * ntasks-per-node > 1 (see srun --mpi=list)")
        ->capture_default_str();
    cmd->add_option("--out", o->c.run_dir, "Run directory: script, logs, checkpoints, metrics")
        ->required();
    cmd->add_flag("--dry-run", o->dry_run, "Print the script; write and submit nothing");
    cmd->add_flag("--json", o->json, "Print {script_path, job_id, script} as JSON");
    cmd->add_option("train_args", o->c.train_args, "Arguments of `looptool train`, after --");
    return [o] {
        auto &c = o->c;
        namespace fs = std::filesystem;
        if (!c.run_dir.empty()) c.run_dir = fs::absolute(c.run_dir).lexically_normal().string();
        while (c.run_dir.size() > 1 && c.run_dir.back() == '/') c.run_dir.pop_back();
        c.workdir = fs::current_path().string();
        // This runs in looptool-train; the job names the `looptool` beside it, as users do.
        const fs::path self = fs::read_symlink("/proc/self/exe");
        const fs::path front = self.parent_path() / "looptool";
        c.looptool = (fs::exists(front) ? front : self).string();
        if (c.train_args.empty())
            throw Error(
                "slurm-train: no train arguments after '--' (e.g. -- --dataset DIR --trainer "
                "apex)");
        std::string script = looptune::slurm::sbatch_script(c);
        check_train_args(c.train_args, c.run_dir);
        if (o->dry_run) {
            if (o->json)
                print_json({{"script_path", nullptr}, {"job_id", nullptr}, {"script", script}});
            else
                fmt::print("{}", script);
            return 0;
        }
        const std::string path = looptune::slurm::write_sbatch_script(c);
        const std::string job = looptune::slurm::submit(path);
        if (o->json)
            print_json({{"script_path", path}, {"job_id", job}, {"script", script}});
        else
            fmt::print("wrote {}\nsubmitted batch job {}\nlogs: {}/slurm-{}.out\n", path, job,
                       c.run_dir, job);
        return 0;
    };
}

}  // namespace looptool::cli
