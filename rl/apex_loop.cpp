#include "rl/apex_loop.h"
#include "rl/episode_starts.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "looptool/ir/error.h"

namespace looptune {

double apex_epsilon(const TrainConfig &c, int i, int n) {
    if (n <= 1) return c.apex_eps;
    return std::pow(c.apex_eps, 1 + c.apex_alpha * i / double(n - 1));
}

void ApexPace::observe() {
    if (!learning &&
        replay_.size() >= std::min<int64_t>(config.learning_starts, config.replay_capacity))
        learning = true;
}

int64_t ApexPace::step_limit(int64_t slack) const {
    if (!learning || config.updates_per_step <= 0) return std::numeric_limits<int64_t>::max();
    const double paid = (updates - start_updates) / config.updates_per_step;
    return start_steps + static_cast<int64_t>(paid) + slack;
}

double ApexPace::update_target(int64_t env_steps) const {
    return start_updates + config.updates_per_step * static_cast<double>(env_steps - start_steps);
}

void run_apex_actor(int id, int num_actors, const TrainConfig &c, const Dataset &dataset,
                    const QNetConfig &net_config, int64_t start_steps, ActorLink &link) {
    Environment env(train_env_config(c));
    const bool graph = c.graph();
    QNet net(net_config);
    int64_t version = -1;
    const double eps = apex_epsilon(c, id, num_actors);
    std::mt19937_64 rng(c.seed * 1000003 + id * 7919 + start_steps);
    EpisodeStarts starts(c, dataset);
    std::vector<Transition> outbox;
    // Batches of 16: one forward pass for their initial priorities.
    auto flush = [&] {
        if (outbox.empty()) return;
        const std::vector<float> p = Learner::td_errors(net, outbox);
        link.send(outbox, p);
        outbox.clear();
    };
    while (!link.stopping()) {
        starts.reset(env, rng);
        RlState current;  // env's state, encoded by the first step
        NStepBuilder nstep(c.n_step, c.gamma);
        double ep_reward = 0, base = env.gflops(), best = base;
        bool done = false;
        while (!done && !link.stopping()) {
            link.refresh(net, &version);
            if (!link.claim_step()) {  // the budget or the replay ratio says wait
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                continue;
            }
            const ActedStep step =
                act_epsilon_greedy(net, env, graph, eps, rng, nstep, &outbox, current);
            if (!step.acted) {  // nothing legal: the episode ends here
                link.release_step();
                done = true;
                break;
            }
            link.step_taken();
            done = step.done;
            ep_reward += step.reward;
            best = std::max(best, env.gflops());
            if (outbox.size() >= 16) flush();
        }
        flush();
        if (done) link.episode_done(ep_reward, best / std::max(base, 1e-9));
    }
}

void run_apex_learner(const TrainConfig &c, Learner &learner, PrioritizedReplay &replay,
                      const std::vector<Demo> &demos, std::mutex &learner_mutex, ApexPace &pace,
                      LearnerLink &link) {
    RunningMean loss_mean(200);
    while (!link.stopping()) {
        const int64_t steps = link.env_steps();
        pace.observe();
        if (!pace.learning || learner.updates >= pace.update_target(steps)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        loss_mean.push(learner.replay_step(replay, steps, &demos, &learner_mutex));
        pace.loss = loss_mean.mean();
        pace.updates = learner.updates;
        if (learner.updates % c.weight_sync == 0) link.publish(learner.online);
    }
}

}  // namespace looptune
