// experiments/slurm/sbatch.h and `looptool slurm-train`: the script's content, input
// validation, and submission through a stand-in sbatch (or none) on PATH.
#include "experiments/slurm/sbatch.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>

#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptune::slurm;
using looptool::tests::run_cli;
using looptool::tests::slurp;
using looptool::tests::TempDir;
namespace fs = std::filesystem;

namespace {

/// Sets PATH for the scope of the object.
struct ScopedPath {
    std::optional<std::string> old;
    explicit ScopedPath(const std::string &path) {
        if (const char *p = std::getenv("PATH")) old = p;
        setenv("PATH", path.c_str(), 1);
    }
    ~ScopedPath() {
        if (old)
            setenv("PATH", old->c_str(), 1);
        else
            unsetenv("PATH");
    }
};

/// An executable shell script `dir/bin/name` (its directory created).
std::string fake_tool(const TempDir &dir, const std::string &name, const std::string &body) {
    fs::create_directories(dir.path / "bin");
    const fs::path p = dir.path / "bin" / name;
    looptool::tests::write(dir, "bin/" + name, "#!/bin/sh\n" + body);
    fs::permissions(p, fs::perms::owner_all);
    return (dir.path / "bin").string();
}

const std::string kTrain = "--dataset data/mm --trainer apex --actors 1 --steps 300";

std::string real(const fs::path &p) { return fs::canonical(p).string(); }

SbatchConfig valid_config() {
    SbatchConfig c;
    c.run_dir = "/runs/a";
    c.workdir = "/home/u";
    c.looptool = "/opt/looptool";
    c.train_args = {"--dataset", "d"};
    return c;
}

}  // namespace

TEST(Slurm, DryRunPrintsARequeueSafeScriptAndWritesNothing) {
    TempDir dir("slurm");
    auto r = run_cli(dir, "slurm-train --out run --time 00:05:00 --dry-run -- " + kTrain);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string cwd = real(dir.path), run = cwd + "/run";
    const std::string &s = r.out;
    EXPECT_EQ(s.rfind("#!/bin/bash\n", 0), 0u) << s;
    for (const std::string &line : std::vector<std::string>{
             "#SBATCH --job-name=looptune-train", "#SBATCH --nodes=1",
             "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=1", "#SBATCH --time=00:05:00",
             "#SBATCH --requeue", "#SBATCH --open-mode=append", "#SBATCH --chdir=" + cwd,
             "#SBATCH --output=" + run + "/slurm-%j.out"})
        EXPECT_NE(s.find("\n" + line + "\n"), std::string::npos) << line << "\n" << s;
    EXPECT_EQ(s.find("--partition"), std::string::npos);
    EXPECT_EQ(s.find("--mem"), std::string::npos);
    // The training line is the last one: always srun, always --resume, never --distributed.
    const std::string want =
        "\nsrun " + real(LOOPTOOL_CLI) + " train " + kTrain + " --out " + run + " --resume\n";
    ASSERT_GE(s.size(), want.size());
    EXPECT_EQ(s.substr(s.size() - want.size()), want) << s;
    EXPECT_TRUE(fs::is_empty(dir.path)) << "a dry run wrote something";
}

TEST(Slurm, SeveralTasksRunUnderPmixWithDistributedMpi) {
    TempDir dir("slurm");
    auto r = run_cli(dir,
                     "slurm-train --nodes 2 --ntasks-per-node 3 --cpus-per-task 4 --partition cpu "
                     "--mem 8G --job-name lt.apex --out run --dry-run -- " +
                         kTrain);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char *line :
         {"#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=3", "#SBATCH --cpus-per-task=4",
          "#SBATCH --partition=cpu", "#SBATCH --mem=8G", "#SBATCH --job-name=lt.apex"})
        EXPECT_NE(r.out.find(std::string("\n") + line + "\n"), std::string::npos) << line << "\n"
                                                                                  << r.out;
    EXPECT_NE(
        r.out.find("\nsrun --mpi=pmix " + real(LOOPTOOL_CLI) + " train " + kTrain + " --out " +
                   real(dir.path) + "/run --resume --distributed mpi --store \"$NODE_STORE\"\n"),
        std::string::npos)
        << r.out;
}

TEST(Slurm, MpiPluginIsChosenForSeveralTasksOnly) {
    TempDir dir("slurm");
    auto r =
        run_cli(dir, "slurm-train --ntasks-per-node 2 --mpi pmi2 --out run --dry-run -- " + kTrain);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\nsrun --mpi=pmi2 " + real(LOOPTOOL_CLI) + " train "), std::string::npos)
        << r.out;
    r = run_cli(dir, "slurm-train --mpi pmi2 --out run --dry-run -- " + kTrain);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("--mpi"), std::string::npos) << r.out;
    r = run_cli(dir,
                "slurm-train --ntasks-per-node 2 --mpi 'pmix;x' --out run --dry-run -- " + kTrain);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--mpi 'pmix;x'"), std::string::npos) << r.err;
}

TEST(Slurm, DryRunJson) {
    TempDir dir("slurm");
    auto text = run_cli(dir, "slurm-train --out run --dry-run -- " + kTrain);
    auto r = run_cli(dir, "slurm-train --out run --dry-run --json -- " + kTrain);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.at("script_path").is_null());
    EXPECT_TRUE(j.at("job_id").is_null());
    EXPECT_EQ(j.at("script").get<std::string>(), text.out);
    EXPECT_TRUE(fs::is_empty(dir.path));
}

TEST(Slurm, BadInputIsRejectedAndLeavesNoFile) {
    TempDir dir("slurm");
    // A stand-in sbatch that would accept anything: a rejection must come from validation.
    ScopedPath path(fake_tool(dir, "sbatch", "echo 'Submitted batch job 1'\n"));
    // One of each kind through the binary (each start costs ~1 s: LibTorch loads); every rule
    // is checked on validate() in ValidationRejectsEachBadField.
    const std::vector<std::pair<std::string, std::string>> cases{
        {"--out run --time 5:00 -- " + kTrain, "is not HH:MM:SS"},
        {"--out run --ntasks-per-node -2 -- " + kTrain,
         "--ntasks-per-node must be a positive count"},
        {"--out run --mem 4GB -- " + kTrain, "--mem '4GB'"},
        {"--out 'run dir' -- " + kTrain, "contains whitespace"},
        {"--out run --", "no train arguments"},
        {"--out run -- " + kTrain + " --resume", "'--resume' among the train arguments"},
        {"-- " + kTrain, "--out is required"},
    };
    for (const auto &[args, message] : cases) {
        auto r = run_cli(dir, "slurm-train " + args);
        EXPECT_NE(r.exit_code, 0) << args;
        EXPECT_NE(r.err.find(message), std::string::npos) << args << "\nstderr: " << r.err;
        EXPECT_TRUE(r.out.empty()) << args << "\nstdout: " << r.out;
        for (const auto &e : fs::directory_iterator(dir.path))
            EXPECT_EQ(e.path().filename(), "bin") << args << ": left " << e.path();
    }
}

TEST(Slurm, MissingSbatchIsAClearError) {
    TempDir dir("slurm");
    fs::create_directories(dir.path / "empty");
    ScopedPath path((dir.path / "empty").string());
    auto r = run_cli(dir, "slurm-train --out run -- " + kTrain);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("error: sbatch not found on PATH"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(real(dir.path) + "/run/train.sbatch was written but not submitted"),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(Slurm, SubmitsThroughSbatchAndReportsTheJobId) {
    TempDir dir("slurm");
    ScopedPath path(fake_tool(dir, "sbatch",
                              "printf '%s\\n' \"$@\" > \"${0%/*}/args\"\n"
                              "echo 'Submitted batch job 4242'\n"));
    auto r = run_cli(dir, "slurm-train --out run/ --json -- " + kTrain);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    const std::string script = real(dir.path) + "/run/train.sbatch";
    EXPECT_EQ(j.at("job_id"), "4242");
    EXPECT_EQ(j.at("script_path"), script);
    EXPECT_EQ(slurp(script), j.at("script").get<std::string>());
    EXPECT_EQ(slurp(dir.path / "bin" / "args"), script + "\n");
    for (const auto &e : fs::directory_iterator(dir.path / "run"))
        EXPECT_EQ(e.path().filename(), "train.sbatch") << "left " << e.path();

    auto text = run_cli(dir, "slurm-train --out run -- " + kTrain);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("submitted batch job 4242"), std::string::npos) << text.out;
}

TEST(Slurm, FailingSbatchIsAnErrorWithItsOutput) {
    TempDir dir("slurm");
    ScopedPath path(fake_tool(dir, "sbatch",
                              "echo 'sbatch: error: invalid partition specified: nope' >&2\n"
                              "exit 1\n"));
    auto r = run_cli(dir, "slurm-train --out run --partition nope -- " + kTrain);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(
        r.err.find("failed (exit status 1): sbatch: error: invalid partition specified: nope"),
        std::string::npos)
        << r.err;

    // Success without the expected line is an error too.
    ScopedPath path2(fake_tool(dir, "sbatch", "echo 'queued'\n"));
    r = run_cli(dir, "slurm-train --out run -- " + kTrain);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no 'Submitted batch job N' in its output: 'queued'"), std::string::npos)
        << r.err;
}

TEST(Slurm, ScriptRunsTheTrainerWithExactArguments) {
    // Run the script itself with bash and a stand-in srun: awkward arguments survive quoting.
    TempDir dir("slurm");
    SbatchConfig c = valid_config();
    c.run_dir = real(dir.path) + "/run";
    c.workdir = real(dir.path);
    c.train_args = {"--dataset", "my data/it's", "--note", "$HOME `x` \"q\" ;|&*"};
    c.nodes = 2;
    const std::string bin = fake_tool(dir, "srun", "printf '%s\\n' \"$@\" > \"${0%/*}/args\"\n");
    const std::string script = write_sbatch_script(c);
    EXPECT_EQ(script, c.run_dir + "/train.sbatch");
    const std::string cmd = "cd '" + real(dir.path) + "' && env -u SLURM_JOB_ID -u TMPDIR PATH='" +
                            bin + ":/usr/bin:/bin' bash '" + script + "' > out.txt 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(dir.path / "out.txt");
    EXPECT_NE(slurp(dir.path / "out.txt").find("== looptune slurm-train: job none start 1 on "),
              std::string::npos)
        << slurp(dir.path / "out.txt");
    EXPECT_EQ(slurp(dir.path / "bin" / "args"),
              "--mpi=pmix\n/opt/looptool\ntrain\n--dataset\nmy data/it's\n--note\n$HOME `x` \"q\" "
              ";|&*\n--out\n" +
                  c.run_dir +
                  "\n--resume\n--distributed\nmpi\n--store\n/tmp/looptune-store-none.sqlite\n");
}

TEST(Slurm, ValidationRejectsEachBadField) {
    using Edit = std::function<void(SbatchConfig &)>;
    const std::vector<std::pair<Edit, std::string>> cases{
        {[](auto &c) { c.time = "5:00"; }, "is not HH:MM:SS"},
        {[](auto &c) { c.time = "1:2:3"; }, "is not HH:MM:SS"},
        {[](auto &c) { c.time = "01:60:00"; }, "below 60"},
        {[](auto &c) { c.time = "00:00:60"; }, "below 60"},
        {[](auto &c) { c.time = "0-00:00:00"; }, "is zero"},
        {[](auto &c) { c.nodes = 0; }, "--nodes must be a positive count, got 0"},
        {[](auto &c) { c.ntasks_per_node = -2; }, "--ntasks-per-node must be a positive count"},
        {[](auto &c) { c.cpus_per_task = 0; }, "--cpus-per-task must be a positive count"},
        {[](auto &c) { c.mem = "4GB"; }, "--mem '4GB'"},
        {[](auto &c) { c.mem = "0"; }, "--mem '0'"},
        {[](auto &c) { c.job_name = "a b"; }, "--job-name 'a b'"},
        {[](auto &c) { c.job_name = ""; }, "--job-name ''"},
        {[](auto &c) { c.partition = "x;y"; }, "--partition 'x;y'"},
        {[](auto &c) { c.mpi = "pmix x"; }, "--mpi 'pmix x'"},
        {[](auto &c) { c.run_dir = ""; }, "the run directory (--out) is required"},
        {[](auto &c) { c.run_dir = "runs/a"; }, "must be an absolute path"},
        {[](auto &c) { c.run_dir = "/runs/a b"; }, "contains whitespace"},
        {[](auto &c) { c.run_dir = "/runs/%j"; }, "'%'"},
        {[](auto &c) { c.workdir = "/home/it's"; }, "the working directory '/home/it's'"},
        {[](auto &c) { c.looptool = ""; }, "the looptool binary is required"},
        {[](auto &c) { c.train_args.push_back("--out"); }, "'--out' among the train arguments"},
        {[](auto &c) { c.train_args.push_back("--out=x"); }, "'--out=x' among the train arguments"},
        {[](auto &c) { c.train_args.push_back("--resume"); },
         "slurm-train sets --out RUN_DIR --resume itself"},
        {[](auto &c) {
             c.nodes = 2;
             c.train_args.push_back("--distributed=mpi");
         },
         "--resume --distributed mpi itself"},
        {[](auto &c) { c.train_args.push_back("a\nb"); }, "line break"},
    };
    for (const auto &[edit, message] : cases) {
        SbatchConfig c = valid_config();
        edit(c);
        try {
            validate(c);
            ADD_FAILURE() << "accepted; expected: " << message;
        } catch (const looptool::Error &e) {
            EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
        }
        EXPECT_THROW(sbatch_script(c), looptool::Error) << message;
    }
}

TEST(Slurm, ValidationAndParsing) {
    EXPECT_NO_THROW(validate(valid_config()));
    for (const char *t : {"00:00:01", "100:00:00", "2-12:30:00"}) {
        SbatchConfig c = valid_config();
        c.time = t;
        EXPECT_NO_THROW(validate(c)) << t;
    }
    EXPECT_EQ(total_tasks([] {
                  auto c = valid_config();
                  c.nodes = 3;
                  c.ntasks_per_node = 2;
                  return c;
              }()),
              6);

    EXPECT_EQ(parse_job_id("Submitted batch job 17\n"), "17");
    EXPECT_EQ(parse_job_id("sbatch: warning: x\nSubmitted batch job 9 on cluster c\n"), "9");
    EXPECT_THROW(parse_job_id("Submitted batch job\n"), looptool::Error);
    EXPECT_EQ(shell_quote("--steps"), "--steps");
    EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
    EXPECT_EQ(shell_quote(""), "''");
}
