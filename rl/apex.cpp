// Ape-X (Horgan et al. 2018) on threads: N actor threads, each with its own environment and
// JIT and its own exploration rate, feed one prioritized replay (initial priorities computed by
// the actor's copy of the network); a learner thread trains on it at the configured replay
// ratio and publishes weights every `weight_sync` updates; the main thread checkpoints,
// evaluates and reports. All actors share the measurement store. The loops themselves are in
// rl/apex_loop.h (the same over MPI); this file is the in-process link between them.
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "looptool/ir/error.h"
#include "rl/apex_loop.h"
#include "rl/demonstrations.h"
#include "rl/training_run.h"

namespace looptune {

namespace {

/// Steps an actor may run ahead of the replay ratio; small, since claims are per step.
constexpr int64_t kPaceSlackPerActor = 4;

/// The learner's latest weights, for actors to copy.
struct Published {
    std::mutex mutex;
    QNet net{nullptr};
    int64_t version = 0;
};

struct Shared {
    std::atomic<int64_t> env_steps{0}, claimed{0}, episodes{0};
    std::atomic<bool> stop{false};
    std::mutex stats_mutex;
    RunningMean episode_reward, episode_speedup;
    FirstError error;
    Published published;
};

class ThreadActorLink final : public ActorLink {
public:
    ThreadActorLink(const TrainConfig &c, Shared &s, PrioritizedReplay &replay, ApexPace &pace)
        : c_(c), s_(s), replay_(replay), pace_(pace) {}
    bool stopping() const override { return s_.stop; }
    bool claim_step() override {
        pace_.observe();
        const int64_t limit = std::min(c_.steps, pace_.step_limit(kPaceSlackPerActor * c_.actors));
        int64_t claimed = s_.claimed;
        while (claimed < limit)
            if (s_.claimed.compare_exchange_weak(claimed, claimed + 1)) return true;
        return false;
    }
    void release_step() override { --s_.claimed; }
    void step_taken() override {
        if (++s_.env_steps >= c_.steps) s_.stop = true;
    }
    void refresh(QNet &net, int64_t *version) override {
        std::lock_guard<std::mutex> g(s_.published.mutex);
        if (s_.published.version == *version) return;
        copy_weights(net, s_.published.net);
        *version = s_.published.version;
    }
    void send(std::vector<Transition> &ts, const std::vector<float> &priorities) override {
        for (size_t i = 0; i < ts.size(); ++i) replay_.add(std::move(ts[i]), priorities[i]);
    }
    void episode_done(double reward, double speedup) override {
        ++s_.episodes;
        std::lock_guard<std::mutex> g(s_.stats_mutex);
        s_.episode_reward.push(reward);
        s_.episode_speedup.push(speedup);
    }

private:
    const TrainConfig &c_;
    Shared &s_;
    PrioritizedReplay &replay_;
    ApexPace &pace_;
};

class ThreadLearnerLink final : public LearnerLink {
public:
    explicit ThreadLearnerLink(Shared &s) : s_(s) {}
    bool stopping() const override { return s_.stop; }
    int64_t env_steps() const override { return s_.env_steps; }
    void publish(const QNet &online) override {
        std::lock_guard<std::mutex> g(s_.published.mutex);
        copy_weights(s_.published.net, online);
        ++s_.published.version;
    }

private:
    Shared &s_;
};

/// The main thread's view of the run: the shared counts, the learner (under its mutex between
/// updates) and the threads, which it joins when the run stops.
struct Supervisor {
    const TrainConfig &c;
    TrainingRun &run;
    Shared &shared;
    ApexPace &pace;
    Learner &learner;
    std::mutex &learner_mutex;
    std::thread learner_thread;
    std::vector<std::thread> actors;

    void join_all() {
        shared.stop = true;
        for (auto &t : actors)
            if (t.joinable()) t.join();
        if (learner_thread.joinable()) learner_thread.join();
    }
    void snapshot_counts(RunSnapshot &at) {
        at.env_steps = shared.env_steps;
        at.episodes = shared.episodes;
        at.updates = pace.updates;
        at.loss = pace.loss;
        at.epsilon = apex_epsilon(c, 0, c.actors);
        std::lock_guard<std::mutex> g(shared.stats_mutex);
        at.episode_reward = shared.episode_reward.mean();
        at.episode_speedup = shared.episode_speedup.mean();
    }
    void checkpoint(RunSnapshot &at) {
        std::lock_guard<std::mutex> g(learner_mutex);
        at.updates = learner.updates;
        run.checkpoint(learner, at, {{"actors", c.actors}});
    }
};

/// Until the run stops: checkpoints, evaluations (of a snapshot of the learner's weights),
/// metrics rows and the progress line at their intervals, and all of them once the threads
/// are joined. Threads must be joined whatever happens here (an evaluation that throws, say).
RunSnapshot supervise(Supervisor &s, Environment &eval_env, const QNetConfig &net_config) {
    const TrainConfig &c = s.c;
    RunSnapshot at;
    QNet snapshot(net_config);
    int64_t next_checkpoint = (s.shared.env_steps / c.checkpoint_every + 1) * c.checkpoint_every;
    int64_t next_eval =
        c.eval_every > 0 ? (s.shared.env_steps / c.eval_every + 1) * c.eval_every : INT64_MAX;
    int64_t next_row = s.shared.env_steps + 250;
    const std::string who = fmt::format("{} actors", c.actors);
    try {
        for (;;) {
            if (s.run.out_of_time()) s.shared.stop = true;
            const bool last = s.shared.stop.load();
            if (last) s.join_all();
            s.snapshot_counts(at);
            if (last && !s.shared.error.empty()) break;  // keep the last good checkpoint
            if (at.env_steps >= next_checkpoint || last) {
                s.checkpoint(at);
                next_checkpoint += c.checkpoint_every;
            }
            const bool evaluate = at.env_steps >= next_eval || last;
            if (evaluate) {
                {
                    std::lock_guard<std::mutex> g(s.learner_mutex);
                    copy_weights(snapshot, s.learner.online);
                }
                at.eval = s.run.evaluate(snapshot, eval_env);
                next_eval += c.eval_every;
            }
            if (at.env_steps >= next_row || evaluate) {
                s.run.record(at, evaluate);
                next_row = at.env_steps + 250;
            }
            s.run.report(at, who, last);
            if (last) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    } catch (...) {
        s.join_all();
        throw;
    }
    return at;
}

}  // namespace

TrainSummary train_apex(const TrainConfig &c) {
    TrainingRun run(c);
    run.create_dir();
    Environment eval_env(train_env_config(c));
    const QNetConfig net_config = net_config_for(c, eval_env);
    Learner learner(c, net_config);
    PrioritizedReplay replay(c.replay_capacity, c.per_alpha, c.seed);
    run.start(learner);
    const std::vector<Demo> demos = warm_start(c, eval_env, learner, replay, run.resumed());
    run.evaluate_start(learner.online, eval_env);

    Shared shared;
    shared.env_steps = shared.claimed = run.start_steps();
    shared.episodes = run.start_episodes();
    shared.published.net = QNet(net_config);
    copy_weights(shared.published.net, learner.online);
    run.loop_started(learner.updates);
    ApexPace pace(c, run.start_steps(), learner.updates, replay);
    // The evaluator's and checkpointer's view of the learner, taken between updates.
    std::mutex learner_mutex;
    if (shared.env_steps >= c.steps) shared.stop = true;  // a finished run resumed: nothing to do

    Supervisor s{c, run, shared, pace, learner, learner_mutex, {}, {}};
    ThreadLearnerLink learner_link(shared);
    s.learner_thread = std::thread([&] {
        try {
            run_apex_learner(c, learner, replay, demos, learner_mutex, pace, learner_link);
        } catch (...) {
            shared.error.capture("learner");
            shared.stop = true;
        }
    });
    ThreadActorLink actor_link(c, shared, replay, pace);
    for (int i = 0; i < c.actors; ++i)
        s.actors.emplace_back([&, i] {
            try {
                run_apex_actor(i, c.actors, c, run.dataset(), net_config, run.start_steps(),
                               actor_link);
            } catch (...) {
                shared.error.capture(fmt::format("actor {}", i));
                shared.stop = true;
            }
        });

    RunSnapshot at = supervise(s, eval_env, net_config);
    if (!shared.error.empty())
        shared.error.rethrow(" (the last checkpoint in " + c.out_dir +
                             " is intact: rerun with --resume to continue)");
    at.updates = learner.updates;
    TrainSummary summary = run.summary(at);
    summary.adapt_gain = run.adapt_gain(learner.online, eval_env);
    return summary;
}

}  // namespace looptune
