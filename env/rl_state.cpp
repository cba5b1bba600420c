#include "env/rl_state.h"

#include <algorithm>

namespace looptune {

RlShape rl_shape(const Environment &env) {
    return RlShape{env.config().max_loops, static_cast<int>(env.action_space().size())};
}

RlState encode_state(const Environment &env, bool with_graph) {
    const RlShape shape = rl_shape(env);
    const looptool::Program &p = env.program();
    RlState s;
    s.flat.reserve(shape.flat_size());
    Observation loops = loops_tensor(p, shape.max_loops);
    Observation strides = stride_tensor(p);
    Observation prev = prev_actions_tensor(env.history(), env.action_space());
    s.flat.insert(s.flat.end(), loops.values.begin(), loops.values.end());
    s.flat.insert(s.flat.end(), strides.values.begin(), strides.values.end());
    s.flat.insert(s.flat.end(), prev.values.begin(), prev.values.end());
    const int max_steps = std::max(1, env.config().max_steps);
    s.flat.push_back(static_cast<float>(max_steps - env.steps_taken()) / max_steps);
    s.flat.insert(s.flat.end(), env.machine_vector().begin(), env.machine_vector().end());
    if (with_graph) s.graph = to_dense(loop_tree_graph(p), env.machine_vector());
    const bool over = env.steps_taken() >= env.config().max_steps;
    std::vector<bool> mask = env.action_mask();
    s.mask.resize(mask.size());
    for (size_t i = 0; i < mask.size(); ++i) s.mask[i] = !over && mask[i];
    return s;
}

bool any_legal(const RlState &s) {
    return std::any_of(s.mask.begin(), s.mask.end(), [](uint8_t m) { return m != 0; });
}

}  // namespace looptune
