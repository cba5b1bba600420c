// Genetic search: a population of action sequences of the step limit. A sequence is decoded
// from the start state applying its actions in order and skipping the ones illegal where they
// fall; its fitness is the best GFLOPS along the decoded walk. Tournament selection, one-point
// crossover, per-gene mutation, and the best individual kept (elitism).
#include <algorithm>
#include <random>

#include "search/search.h"

namespace looptune::detail {

using namespace looptool;

namespace {
struct Individual {
    std::vector<Action> genes;
    double fitness = -1;
};
}  // namespace

SearchResult genetic(Environment &env, const Program &start, const SearchConfig &c) {
    SearchState s(env, start, c);
    std::mt19937_64 rng(c.seed);
    const auto &space = env.action_space().actions;
    auto random_action = [&] { return space[size_t(rng() % space.size())]; };
    auto uniform = [&] { return double(rng() >> 11) * 0x1.0p-53; };

    auto decode = [&](Individual &ind) {
        Program p = start;
        std::vector<Action> path;
        double best = s.evaluate(p, path);
        for (Action a : ind.genes) {
            if (!is_legal(p, a)) continue;
            p = apply(p, a);
            path.push_back(a);
            double g = s.evaluate(p, path);
            if (g < 0) break;
            best = std::max(best, g);
        }
        ind.fitness = best;
    };

    const int pop_size = std::max(2, c.population);
    std::vector<Individual> pop(static_cast<size_t>(pop_size));
    for (auto &ind : pop) {
        ind.genes.resize(size_t(c.max_steps));
        for (auto &g : ind.genes) g = random_action();
        if (s.out_of_time()) break;
        decode(ind);
    }
    auto tournament = [&]() -> const Individual & {
        const Individual *best = &pop[size_t(rng() % pop.size())];
        for (int i = 1; i < c.tournament; ++i) {
            const Individual &x = pop[size_t(rng() % pop.size())];
            if (x.fitness > best->fitness) best = &x;
        }
        return *best;
    };
    for (int gen = 0; gen < c.generations && !s.out_of_time(); ++gen) {
        std::vector<Individual> next;
        next.push_back(*std::max_element(pop.begin(), pop.end(), [](const auto &a, const auto &b) {
            return a.fitness < b.fitness;
        }));
        while (int(next.size()) < pop_size && !s.out_of_time()) {
            Individual child = tournament();
            if (uniform() < c.crossover_rate) {
                const Individual &other = tournament();
                size_t cut = size_t(rng() % child.genes.size());
                std::copy(other.genes.begin() + std::ptrdiff_t(cut), other.genes.end(),
                          child.genes.begin() + std::ptrdiff_t(cut));
            }
            for (auto &g : child.genes)
                if (uniform() < c.mutation_rate) g = random_action();
            decode(child);
            next.push_back(std::move(child));
        }
        if (int(next.size()) == pop_size) pop = std::move(next);
    }
    return s.finish("genetic");
}

}  // namespace looptune::detail
