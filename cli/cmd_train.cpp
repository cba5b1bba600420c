#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "cli/commands.h"
#include "cli/validators.h"
#include "experiments/plot.h"
#include "looptool/ir/error.h"
#include "policy/policy_extend.h"
#include "policy/policy_file.h"
#include "rl/metrics.h"
#include "rl/trainer.h"
#include "tune/policy.h"

namespace looptool::cli {

// Training curves from metrics.csv (read by column name): episode reward and speedup, and the
// periodic evaluation.
static void plot_training(const std::string &metrics_csv, const std::string &png) {
    const looptune::MetricsTable table = looptune::MetricsTable::read(metrics_csv);
    looptune::Series reward{"episode reward (mean of last 50)", {}, {}},
        train_speedup{"train episodes: best / naive (mean of last 50)", {}, {}},
        eval{"test split: geomean best / naive (greedy policy)", {}, {}};
    table.series("env_steps", "episode_reward", &reward.x, &reward.y);
    table.series("env_steps", "episode_speedup", &train_speedup.x, &train_speedup.y);
    table.series("env_steps", "eval_speedup", &eval.x, &eval.y);
    if (train_speedup.x.empty()) return;
    std::vector<looptune::Series> series{train_speedup};
    if (!eval.x.empty()) series.push_back(eval);
    looptune::plot_lines(
        png, {"Training: speedup over the naive nest", "environment steps", "speedup (x)"}, series);
    looptune::plot_lines(
        png.substr(0, png.size() - 4) + "_reward.png",
        {"Training: episode reward", "environment steps", "reward (sum over the episode)"},
        {reward});
    // The held-out figure against wall time (with --adapt: from before the first step).
    looptune::Series eval_time{"test split: geomean best / naive (greedy policy)", {}, {}};
    table.series("seconds", "eval_speedup", &eval_time.x, &eval_time.y);
    if (!eval_time.x.empty())
        looptune::plot_lines(png.substr(0, png.size() - 4) + "_eval_time.png",
                             {"Training: held-out result over time", "seconds", "speedup (x)"},
                             {eval_time});
    // With seed starts: what the policy adds to tune's seeds (1.0 when it adds nothing).
    looptune::Series seed_gain{"test split, geomean", {}, {}};
    if (table.has("eval_seed_gain"))
        table.series("env_steps", "eval_seed_gain", &seed_gain.x, &seed_gain.y);
    if (!seed_gain.x.empty())
        looptune::plot_lines(
            png.substr(0, png.size() - 4) + "_seeds.png",
            {"Training: best of the seeds and the policy's rollouts from them / best seed",
             "environment steps", "gain (x)"},
            {seed_gain});
}

// A word option stored as one of our enums: the words are parsed here, once, so nothing
// downstream compares strings (rl/trainer.h gives each value its name).
template <class E>
static void add_enum_option(CLI::App *cmd, const std::string &flag, E *field,
                            std::initializer_list<E> values, const std::string &help) {
    std::vector<std::string> names;
    for (E e : values) names.push_back(looptune::name(e));
    const std::vector<E> all(values);
    cmd->add_option_function<std::string>(
           flag,
           [field, all](const std::string &word) {
               for (E e : all)
                   if (word == looptune::name(e)) *field = e;
           },
           help)
        ->check(CLI::IsMember(names))
        ->default_str(looptune::name(*field));
}

struct TrainOptions {
    looptune::TrainConfig c;
    bool json = false, quiet = false, no_plots = false, adapt = false, no_install = false;
    CLI::App *cmd = nullptr;
};

namespace {

void add_train_run_options(CLI::App *cmd, looptune::TrainConfig &c) {
    cmd->add_option("--dataset", c.dataset_dir, "Directory of benchmark files")->required();
    cmd->add_option("--out", c.out_dir, "Run directory: checkpoint, policy, metrics, plots")
        ->required();
    add_enum_option(cmd, "--trainer", &c.trainer, {looptune::Trainer::Dqn, looptune::Trainer::Apex},
                    "dqn or apex");
    cmd->add_option("--actors", c.actors, "Ape-X actor threads")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--steps", c.steps, "Environment steps in total")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--max-seconds", c.max_seconds, "Stop after this long (0: no limit)")
        ->capture_default_str()
        ->check(non_negative());
    cmd->add_flag("--resume", c.resume,
                  "Continue from RUN_DIR/checkpoint.pt (fresh start when there is none)");
    cmd->add_option("--seed", c.seed, "Seed (network, exploration, replay)")
        ->capture_default_str()
        ->check(unsigned_int());
    cmd->add_option("--split-seed", c.split_seed, "Seed of the train/test split")
        ->capture_default_str()
        ->check(unsigned_int());
    cmd->add_option("--warmstart", c.warmstart,
                    "Trace CSV from `looptool search --trace` to pre-train on");
    cmd->add_flag("--warmstart-machines", c.warmstart_machines,
                  "Replay the traces also as each other machine of the store (its rows, its "
                  "machine vector): stores merged from several machines teach one policy");
    cmd->add_option("--warmstart-updates", c.warmstart_updates, "Supervised updates before RL")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--warmstart-min-speedup", c.warmstart_min_speedup,
                    "Imitate only each benchmark's best trace, and only if it reaches this speedup")
        ->capture_default_str()
        ->check(non_negative());
    cmd->add_option("--seed-starts", c.seed_starts,
                    "Probability that an episode starts at a state one of tune's seeds (tile "
                    "members, the conv family) reaches, instead of the naive nest")
        ->capture_default_str()
        ->check(unit_interval());
    cmd->add_option("--init-policy", c.init_policy,
                    "Start from this flat policy's weights (its network must match this run's)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--demo-margin", c.demo_margin, "Large-margin loss margin for demonstrations")
        ->capture_default_str()
        ->check(non_negative());
    cmd->add_option("--space", c.action_space,
                    "Action space: looptune, full, layout or threads (with --adapt: the starting "
                    "policy widened to it, `policy extend`)")
        ->capture_default_str()
        ->check(CLI::IsMember({"looptune", "full", "layout", "threads"}));
    cmd->add_option("--episode-steps", c.max_steps, "Actions per episode")
        ->capture_default_str()
        ->check(int_in(1, looptune::kMaxEpisodeSteps));
    add_threads_option(cmd, c.threads);
    cmd->add_option("--max-loops", c.max_loops, "Rows of loops_tensor")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option(
        "--store", c.store_path,
        "Measurement store (default RUN_DIR/store.sqlite); with --distributed mpi, %h becomes the "
        "host name and the node stores are merged into RUN_DIR/store.sqlite at the end");
}

void add_train_learner_options(CLI::App *cmd, looptune::TrainConfig &c) {
    add_enum_option(cmd, "--encoder", &c.encoder, {looptune::Encoder::Mlp, looptune::Encoder::Gnn},
                    "mlp or gnn");
    cmd->add_option("--hidden", c.hidden, "Hidden width")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--gnn-hidden", c.gnn_hidden, "GNN vertex embedding width")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--gnn-rounds", c.gnn_rounds, "GNN message-passing rounds")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--lr", c.lr, "Adam learning rate")->capture_default_str()->check(positive());
    cmd->add_option("--gamma", c.gamma, "Discount")->capture_default_str()->check(unit_interval());
    cmd->add_option("--n-step", c.n_step, "n-step returns")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--batch", c.batch, "Batch size")->capture_default_str()->check(at_least(1));
    cmd->add_option("--replay", c.replay_capacity, "Replay capacity (transitions)")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--per-alpha", c.per_alpha, "Prioritized replay alpha")
        ->capture_default_str()
        ->check(non_negative());
    cmd->add_option("--per-beta", c.per_beta, "Initial IS exponent (annealed to 1)")
        ->capture_default_str()
        ->check(unit_interval());
    cmd->add_option("--learning-starts", c.learning_starts, "Transitions before learning")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--target-update", c.target_update, "Updates between target syncs")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_flag("--autograd-learner", c.autograd_learner,
                  "Learner updates through LibTorch's autograd instead of the dense oneDNN path "
                  "(same loss and gradients, slower; for checking)");
    cmd->add_option("--grad-clip", c.grad_clip, "Gradient norm clip")
        ->capture_default_str()
        ->check(positive());
}

void add_train_exploration_options(CLI::App *cmd, looptune::TrainConfig &c) {
    cmd->add_option("--eps-start", c.eps_start, "DQN: initial epsilon")
        ->capture_default_str()
        ->check(unit_interval());
    cmd->add_option("--eps-end", c.eps_end, "DQN: final epsilon")
        ->capture_default_str()
        ->check(unit_interval());
    cmd->add_option("--eps-decay-steps", c.eps_decay_steps, "DQN: steps of linear decay")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--updates-per-step", c.updates_per_step,
                    "Replay ratio: learner updates per env step, for dqn and apex alike (Ape-X "
                    "actors wait for a "
                    "learner that falls behind; 0: no learning)")
        ->capture_default_str()
        ->check(non_negative());
    cmd->add_option("--apex-eps", c.apex_eps, "Ape-X: base epsilon")
        ->capture_default_str()
        ->check(unit_interval());
    cmd->add_option("--apex-alpha", c.apex_alpha, "Ape-X: epsilon exponent spread")
        ->capture_default_str()
        ->check(non_negative());
    cmd->add_option("--weight-sync", c.weight_sync, "Ape-X: updates between weight publications")
        ->capture_default_str()
        ->check(at_least(1));
    add_enum_option(
        cmd, "--distributed", &c.distributed,
        {looptune::Distributed::Threads, looptune::Distributed::Mpi},
        "Ape-X across processes: mpi (under mpirun/srun; rank 0 learns, every other rank runs "
        "--actors actors), or threads (all in this process)");
    cmd->add_option("--mpi-timeout", c.mpi_timeout,
                    "MPI: seconds a rank may stay silent before the run stops")
        ->capture_default_str()
        ->check(positive());
}

void add_train_output_options(CLI::App *cmd, TrainOptions &o) {
    auto &c = o.c;
    cmd->add_option("--checkpoint-every", c.checkpoint_every, "Env steps between checkpoints")
        ->capture_default_str()
        ->check(at_least(1));
    cmd->add_option("--eval-every", c.eval_every,
                    "Env steps between test evaluations (0: end only)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--eval-benchmarks", c.eval_benchmarks,
                    "Test benchmarks per evaluation (0: no evaluation)")
        ->capture_default_str()
        ->check(at_least(0));
    cmd->add_option("--device", c.device, "auto, cpu or cuda")->capture_default_str();
    cmd->add_flag(
        "--profile", c.profile,
        "Time each phase of the run (env step: lookups, compiles, measurements; encoding, acting, "
        "replay sampling, updates, checkpoints) and print the split; dqn only");
    cmd->add_flag("--adapt", o.adapt,
                  "Fine-tune a policy on this machine: from --init-policy (default: the shipped "
                  "one), with its network, action space and episode length; unless given, at "
                  "most 600 s, a tenth of the learning rate, epsilon 0.2 to 0.05 over 2000 steps, "
                  "learning after 500 "
                  "transitions, 60% seed starts, an evaluation every 1000 steps. At the end the "
                  "trained and the initial network run side by side on the test benchmarks; "
                  "when the trained one is not slower, it is "
                  "installed where `tune` on this machine picks it up");
    cmd->add_flag("--no-install", o.no_install, "--adapt: do not install the policy");
    cmd->add_flag("--no-plots", o.no_plots, "Skip the PNG training curves");
    cmd->add_flag("--quiet", o.quiet, "No progress lines");
    cmd->add_flag("--json", o.json, "Machine-readable summary on stdout");
}

nlohmann::json train_json(const TrainOptions &o, const looptune::TrainSummary &s,
                          const std::string &plot) {
    nlohmann::json j = {{"out", o.c.out_dir},
                        {"trainer", name(o.c.trainer)},
                        {"env_steps", s.env_steps},
                        {"episodes", s.episodes},
                        {"updates", s.updates},
                        {"seconds", s.seconds},
                        {"eval_speedup", s.eval_speedup},
                        {"eval_seed_gain", s.eval_seed_gain},
                        {"eval_start_speedup", s.eval_start_speedup},
                        {"adapt_gain", s.adapt_gain},
                        {"resumed", s.resumed},
                        {"policy", s.policy_path},
                        {"metrics", s.metrics_path},
                        {"plot", plot},
                        {"failed", nlohmann::json::array()}};
    for (const auto &[file, reason] : s.failed)
        j["failed"].push_back({{"benchmark", file}, {"error", reason}});
    if (o.c.profile) {
        j["profile"] = nlohmann::json::array();
        for (const auto &e : s.profile)
            j["profile"].push_back(
                {{"phase", e.phase}, {"seconds", e.seconds}, {"count", e.count}});
    }
    return j;
}

void print_train(const TrainOptions &o, const looptune::TrainSummary &s, const std::string &plot) {
    if (o.c.profile) {
        double total = 0;  // of this session (a resumed run's summary counts earlier ones too)
        for (const auto &e : s.profile)
            if (e.phase.rfind("  ", 0) != 0) total += e.seconds;
        fmt::print("{:<52} {:>9} {:>7} {:>10}\n", "phase", "seconds", "share", "count");
        for (const auto &e : s.profile)
            fmt::print("{:<52} {:>9.3f} {:>6.1f}% {:>10}\n", e.phase, e.seconds,
                       100 * e.seconds / std::max(total, 1e-9),
                       e.count ? std::to_string(e.count) : "");
    }
    fmt::print("{} steps, {} episodes, {} updates in {:.0f} s{}; test geomean speedup {}\n",
               s.env_steps, s.episodes, s.updates, s.seconds, s.resumed ? " (resumed)" : "",
               s.eval_speedup < 0 ? std::string("- (not evaluated)")
                                  : fmt::format("{:.2f}x", s.eval_speedup));
    if (s.eval_start_speedup > 0)
        fmt::print("test geomean speedup before training (the initial policy): {:.2f}x\n",
                   s.eval_start_speedup);
    if (s.eval_seed_gain > 0)
        fmt::print(
            "test geomean gain over tune's seeds (best of seeds and rollouts from "
            "them / best seed): {:.3f}x\n",
            s.eval_seed_gain);
    fmt::print("policy: {}\nmetrics: {}{}\n", s.policy_path, s.metrics_path,
               plot.empty() ? "" : "\ncurves: " + plot);
    for (const auto &[file, reason] : s.failed)
        fmt::print("failed evaluation benchmark (left out): {}: {}\n", file, reason);
}

// --adapt: the network and environment of the starting policy, and fine-tuning settings where
// the user gave none (a short run from a trained start explores less than one from scratch).
void apply_adapt(TrainOptions &o) {
    auto &c = o.c;
    auto unset = [&](const char *flag) { return o.cmd->get_option(flag)->count() == 0; };
    if (c.init_policy.empty()) c.init_policy = looptune::shipped_policy_path();
    looptune::PolicyInfo info = looptune::Policy::load(c.init_policy).info();
    if (!unset("--space") && c.action_space != info.action_space) {
        // Widened to the asked space, written into the run directory and started from.
        std::filesystem::create_directories(c.out_dir);
        const std::string extended = c.out_dir + "/extended.policy";
        looptune::extend_policy_file(c.init_policy, c.action_space, extended);
        c.init_policy = extended;
        info = looptune::Policy::load(c.init_policy).info();
    }
    c.action_space = info.action_space;
    c.max_steps = info.max_steps;
    c.max_loops = info.max_loops;
    c.encoder = info.encoder == "gnn" ? looptune::Encoder::Gnn : looptune::Encoder::Mlp;
    const nlohmann::json net = nlohmann::json::parse(info.meta_json).at("network");
    c.hidden = net.value("hidden", c.hidden);
    c.gnn_hidden = net.value("gnn_hidden", c.gnn_hidden);
    c.gnn_rounds = net.value("gnn_rounds", c.gnn_rounds);
    if (unset("--max-seconds")) c.max_seconds = 600;
    if (unset("--steps")) c.steps = int64_t(1) << 40;
    if (unset("--lr")) c.lr = c.lr / 10;
    if (unset("--eps-start")) c.eps_start = 0.2;
    if (unset("--eps-decay-steps")) c.eps_decay_steps = 2000;
    if (unset("--learning-starts")) c.learning_starts = 500;
    if (unset("--seed-starts")) c.seed_starts = 0.6;
    if (unset("--eval-every")) c.eval_every = 1000;
    if (unset("--checkpoint-every")) c.checkpoint_every = 1000;
}

// Installs the adapted policy for this machine unless adapt_refusal() gives a reason; says
// which, and why not otherwise.
void install_adapted(const TrainOptions &o, const looptune::TrainSummary &s) {
    // A `threads` policy goes where runs on N > 1 threads look (one file for every N).
    const int threads = o.c.action_space == "threads" ? 2 : 1;
    const std::string to = looptune::adapted_policy_path(threads);
    if (o.no_install || to.empty()) return;
    if (const std::string why = looptune::adapt_refusal(s); !why.empty()) {
        fmt::print(stderr, "not installed: {} (tune keeps {})\n", why,
                   looptune::default_policy_path(threads));
        return;
    }
    std::filesystem::create_directories(std::filesystem::path(to).parent_path());
    const std::string tmp = to + ".tmp";
    std::filesystem::copy_file(s.policy_path, tmp,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(tmp, to);
    fmt::print(stderr,
               "installed for this machine: {} (tune uses it unless --policy or "
               "$LOOPTUNE_POLICY names another)\n",
               to);
}

int run_train(TrainOptions &o) {
    if (o.adapt) apply_adapt(o);
    const bool tty = ::isatty(2);
    if (!o.quiet) {
        o.c.progress = [tty](const std::string &line) {
            if (tty)
                fmt::print(stderr, "\r\033[K{}", line);
            else
                fmt::print(stderr, "{}\n", line);
        };
        o.c.note = [tty](const std::string &line) {
            fmt::print(stderr, "{}{}\n", tty ? "\r\033[K" : "", line);
        };
    }
    looptune::TrainSummary s = looptune::train(o.c);
    if (!s.primary) return 0;  // an MPI actor rank: rank 0 reports and writes the run directory
    if (tty && !o.quiet) fmt::print(stderr, "\n");
    std::string plot;
    if (!o.no_plots && looptune::gnuplot_available()) {
        plot = o.c.out_dir + "/training.png";
        plot_training(s.metrics_path, plot);
    }
    if (o.json)
        print_json(train_json(o, s, plot));
    else
        print_train(o, s, plot);
    if (o.adapt) install_adapted(o, s);
    return s.failed.empty() ? 0 : 2;  // trained, but some evaluation benchmark failed
}

}  // namespace

Run add_train(CLI::App &app) {
    auto *cmd = app.add_subcommand("train", "Train a DQN or Ape-X policy (LibTorch, in process)");
    auto o = std::make_shared<TrainOptions>();
    o->cmd = cmd;
    add_train_run_options(cmd, o->c);
    add_train_learner_options(cmd, o->c);
    add_train_exploration_options(cmd, o->c);
    add_train_output_options(cmd, *o);
    return [o] { return run_train(*o); };
}

}  // namespace looptool::cli
