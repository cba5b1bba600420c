#include "looptool/actions/actions.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <memory>

#include "looptool/actions/action_fuse.h"
#include "looptool/actions/action_pack.h"
#include "looptool/ir/error.h"

namespace looptool {

namespace {
struct ActionInfo {
    Action action;
    const char *name;
    int factor;
};
constexpr ActionInfo kActionInfo[] = {
#define LT_ACTION_INFO(id, name, factor) {Action::id, name, factor},
    LOOPTOOL_ACTIONS(LT_ACTION_INFO)
#undef LT_ACTION_INFO
};

int64_t unrolled_product(const Nest &n) {
    int64_t p = 1;
    for (const auto &l : n.loops)
        if (l.unroll) p *= l.size + (l.tail > 0 ? 1 : 0);
    return p;
}

// `flatten` (docs/actions.md): the loop at the cursor (var a) and its child (var b) become one
// loop over a var p = a * Eb + b of extent Ea * Eb, in the computation too. Legal only where
// every tensor keeps its row-major layout, so buffers, the reference and the kernel's arguments
// stay as they were: each access that uses a or b indexes some dimension d by a (coefficient
// 1, plus terms without b) and d + 1 by b alone (plus vars of extent 1, no offset), the
// tensor's dimension d + 1 is Eb wide, and every access of that tensor does so at the same d.
// The two dimensions become one indexed by A_d * Eb + A_{d+1}, affine again in p.
struct FlattenPlan {
    int a = -1, b = -1;
    std::vector<int> dim;  // per tensor: the fused dimension d, -1 untouched, -2 not accessed
};

const char *flatten_plan(const Program &p, const Nest &nest, int depth, FlattenPlan &plan) {
    const Computation &c = *p.comp;
    if (depth + 1 >= int(nest.loops.size())) return "the loop is the innermost of its nest";
    const int a = nest.loops[size_t(depth)].var, b = nest.loops[size_t(depth) + 1].var;
    if (a == b) return "the child loop has the same variable";
    const int64_t ea = c.vars[size_t(a)].extent, eb = c.vars[size_t(b)].extent;
    if (ea * eb > kMaxExtent) return "the flattened loop would exceed the largest extent";
    if (c.var_index(c.vars[size_t(a)].name + "_" + c.vars[size_t(b)].name) >= 0)
        return "a variable already has the flattened loop's name";
    // Every nest over a or b loops over both, once each, unsplit and plain, b right inside a.
    for (const Nest &n : p.tree.nests) {
        int ia = -1, ib = -1, count = 0;
        for (size_t d = 0; d < n.loops.size(); ++d) {
            const Loop &l = n.loops[d];
            if (l.var != a && l.var != b) continue;
            ++count;
            (l.var == a ? ia : ib) = int(d);
            if (l.tail != 0 || l.size != c.vars[size_t(l.var)].extent)
                return "the two variables must not be split";
            if (l.unroll || l.vectorize) return "the two loops must not be unrolled or vectorized";
        }
        if (count == 0) continue;
        if (count != 2 || ia < 0 || ib != ia + 1)
            return "in every nest the two loops must be adjacent, in this order";
    }
    plan = {a, b, std::vector<int>(c.tensors.size(), -2)};
    auto check = [&](const Access &acc) -> const char * {
        int d = -1;
        for (size_t i = 0; i < acc.index.size(); ++i) {
            const Affine &f = acc.index[i];
            if (f.coef_of(a) == 0) continue;
            if (d >= 0) return "the first variable indexes two dimensions of a tensor";
            if (f.coef_of(a) != 1) return "the first variable has a coefficient other than 1";
            if (f.coef_of(b) != 0) return "one tensor dimension uses both variables";
            d = int(i);
        }
        for (size_t i = 0; i < acc.index.size(); ++i)
            if (acc.index[i].coef_of(b) != 0 && (d < 0 || int(i) != d + 1))
                return "the second variable indexes a dimension not right after the first's";
        if (d >= 0) {
            if (size_t(d) + 1 >= acc.index.size()) return "no tensor dimension after the first's";
            const Affine &g = acc.index[size_t(d) + 1];
            if (g.offset != 0) return "the second variable's dimension has an offset";
            for (const auto &t : g.terms)
                if (t.var == b ? t.coef != 1 : c.vars[size_t(t.var)].extent != 1)
                    return "the second variable's dimension has other terms";
            if (g.coef_of(b) != 1) return "the second variable does not follow the first";
            if (c.tensors[size_t(acc.tensor)].shape[size_t(d) + 1] != eb)
                return "the second variable does not span its tensor dimension";
        }
        // An access that uses neither variable (a subsample's copy over its own variables,
        // action_pack.h) has the two dimensions merged all the same: A_d * Eb + A_{d+1} is
        // affine and reaches the element it did, as A_{d+1} < Eb.
        int &have = plan.dim[size_t(acc.tensor)];
        if (d < 0) {
            if (have == -2) have = -1;
            return nullptr;
        }
        if (have >= 0 && have != d) return "a tensor is accessed two ways";
        have = d;
        return nullptr;
    };
    for (const Statement &s : c.stmts) {
        if (const char *why = check(s.out)) return why;
        std::vector<const Access *> reads;
        collect_reads(s.value, reads);
        for (const Access *r : reads)
            if (const char *why = check(*r)) return why;
    }
    return nullptr;
}

void add_term(Affine &f, int var, int64_t coef) {
    for (auto &t : f.terms)
        if (t.var == var) {
            t.coef += coef;
            return;
        }
    f.terms.push_back({var, coef});
}

Program apply_flatten(const Program &p, const FlattenPlan &plan, LoopTree::Pos pos) {
    const Computation &c = *p.comp;
    const int a = plan.a, b = plan.b;
    const int64_t eb = c.vars[size_t(b)].extent;
    auto var = [b](int v) { return v > b ? v - 1 : v; };
    auto access = [&](const Access &acc) {
        const int d = plan.dim[size_t(acc.tensor)];
        Access out{acc.tensor, {}};
        for (size_t i = 0; i < acc.index.size(); ++i) {
            const Affine &f = acc.index[i];
            if (int(i) == d + 1 && d >= 0) continue;
            const int64_t scale = int(i) == d ? eb : 1;
            Affine g{{}, f.offset * scale};
            for (const auto &t : f.terms)  // a term of coefficient 0 (`0*m`) stays 0
                if (t.coef != 0) add_term(g, var(t.var), t.var == a ? 1 : t.coef * scale);
            if (int(i) == d) {  // A_{d+1}: b (now inside p) and vars of extent 1, or any
                for (const auto &t : acc.index[i + 1].terms)
                    if (t.var != b) add_term(g, var(t.var), t.coef);
                g.offset += acc.index[i + 1].offset;
            }
            out.index.push_back(std::move(g));
        }
        return out;
    };
    std::function<Expr(const Expr &)> expr = [&](const Expr &e) {
        Expr r = e;
        if (e.op == OpKind::Read) r.access = access(e.access);
        for (Expr &arg : r.args) arg = expr(arg);
        return r;
    };
    Computation q;
    q.name = c.name;
    for (size_t v = 0; v < c.vars.size(); ++v) {
        if (int(v) == b) continue;
        Var x = c.vars[v];
        if (int(v) == a) x = {x.name + "_" + c.vars[size_t(b)].name, x.extent * eb};
        q.vars.push_back(std::move(x));
    }
    q.tensors = c.tensors;
    for (size_t t = 0; t < q.tensors.size(); ++t)
        if (int d = plan.dim[t]; d >= 0) {
            auto &shape = q.tensors[t].shape;
            shape[size_t(d)] *= shape[size_t(d) + 1];
            shape.erase(shape.begin() + d + 1);
        }
    for (const Statement &s : c.stmts) q.stmts.push_back({access(s.out), s.reduce, expr(s.value)});
    q.validate();
    Program r;
    r.comp = std::make_shared<const Computation>(std::move(q));
    r.tree = p.tree;
    for (Nest &n : r.tree.nests) {
        for (size_t d = 0; d < n.loops.size(); ++d)
            if (n.loops[d].var == a) {
                n.loops[d].size *= eb;
                n.loops.erase(n.loops.begin() + std::ptrdiff_t(d) + 1);
                break;
            }
        for (Loop &l : n.loops) l.var = var(l.var);
    }
    r.cursor = r.tree.flat(pos);
    validate_loop_tree(*r.comp, r.tree);
    return r;
}
}  // namespace

const char *action_name(Action a) { return kActionInfo[int(a)].name; }
std::vector<std::string> action_names(const std::vector<Action> &actions) {
    std::vector<std::string> names;
    for (Action a : actions) names.push_back(action_name(a));
    return names;
}
int split_factor(Action a) { return kActionInfo[int(a)].factor; }

std::optional<Action> parse_action(std::string_view name) {
    for (const auto &info : kActionInfo)
        if (name == info.name) return info.action;
    return std::nullopt;
}

std::vector<Action> all_actions() {
    std::vector<Action> v;
    for (const auto &info : kActionInfo) v.push_back(info.action);
    return v;
}

namespace {
std::vector<Action> without(std::vector<Action> v, Action a) {
    std::erase(v, a);
    return v;
}
}  // namespace

ActionSpace ActionSpace::preset(std::string_view name) {
    if (name == "looptune")
        return {"looptune",
                {Action::Up, Action::Down, Action::SwapUp, Action::SwapDown, Action::Split4,
                 Action::Split8, Action::Split16}};
    // `full` is the space the shipped policy was trained on (one network output per action):
    // the actions added since stay out of it, and each wider preset adds its own.
    // `threads` is policies/threads.policy's space: `fuse` stays out of it (a fused pair runs
    // on one thread; the seeds offer it).
    std::vector<Action> v = all_actions();
    if (name == "threads") return {"threads", without(v, Action::Fuse)};
    std::erase(v, Action::Parallel);
    if (name == "layout") return {"layout", v};
    std::erase(v, Action::Flatten);
    std::erase(v, Action::Pack);
    std::erase(v, Action::Fuse);
    if (name == "full") return {"full", v};
    throw Error(
        fmt::format("unknown action space '{}' (known: looptune, full, layout, threads)", name));
}

int ActionSpace::index_of(Action a) const {
    for (size_t i = 0; i < actions.size(); ++i)
        if (actions[i] == a) return int(i);
    return -1;
}

const char *why_illegal(const Program &p, Action a) {
    const LoopTree &t = p.tree;
    const int n = t.num_loops();
    if (p.cursor < 0 || p.cursor >= n) return "the cursor is not on a loop";
    const LoopTree::Pos pos = t.pos(p.cursor);
    const Nest &nest = t.nests[size_t(pos.nest)];
    const Loop &cur = nest.loops[size_t(pos.depth)];
    const int last = int(nest.loops.size()) - 1;

    if (const char *why = detail::shared_loops_rule(*p.comp, t, pos, a)) return why;

    if (int f = split_factor(a)) {
        int64_t inner = inner_coverage(nest, pos.depth);
        int64_t e = cur.size * inner + cur.tail;
        int64_t chunk = int64_t(f) * inner;
        if (chunk > e) return "the split factor is larger than the loop";
        if (chunk == e) return "the split would leave an outer loop of one iteration (a no-op)";
        return nullptr;
    }
    switch (a) {
        case Action::Up: return p.cursor == 0 ? "the cursor is on the first loop" : nullptr;
        case Action::Down: return p.cursor == n - 1 ? "the cursor is on the last loop" : nullptr;
        case Action::SwapUp: {
            if (pos.depth == 0) return "the loop is the outermost of its nest";
            const Loop &parent = nest.loops[size_t(pos.depth - 1)];
            if (parent.var == cur.var) return "the parent loop has the same variable";
            if (cur.vectorize) return "a vectorized loop must stay innermost";
            if (parent.parallel) return "a parallel loop must stay outermost";
            return nullptr;
        }
        case Action::SwapDown: {
            if (pos.depth == last) return "the loop is the innermost of its nest";
            const Loop &child = nest.loops[size_t(pos.depth + 1)];
            if (child.var == cur.var) return "the child loop has the same variable";
            if (child.vectorize) return "a vectorized loop must stay innermost";
            if (cur.parallel) return "a parallel loop must stay outermost";
            return nullptr;
        }
        case Action::Merge:
            for (int d = pos.depth - 1; d >= 0; --d)
                if (nest.loops[size_t(d)].var == cur.var) return nullptr;
            return "no enclosing loop over the same variable";
        case Action::Unroll:
            if (cur.unroll) return "the loop is already unrolled";
            if (cur.vectorize) return "the loop is vectorized";
            if (cur.parallel) return "the loop is parallel";
            if (cur.size + (cur.tail > 0) < 2) return "the loop has a single iteration";
            if (unrolled_product(nest) * (cur.size + (cur.tail > 0)) > kMaxUnrollProduct)
                return "the unrolled body would exceed the unroll limit";
            return nullptr;
        // clang-format off
        case Action::Vectorize:
            if (cur.vectorize) return "the loop is already vectorized";
            if (pos.depth != last) return "only the innermost loop of a nest can be vectorized";
            if (cur.unroll) return "the loop is unrolled";
            if (cur.parallel) return "the loop is parallel";
            if (cur.size < 2) return "the loop has a single iteration";
            if (cur.size > kMaxVectorWidth) return "the loop is wider than the widest vector";
            return nullptr;
        case Action::Flatten: {
            FlattenPlan plan;
            return flatten_plan(p, nest, pos.depth, plan);
        }
        case Action::Pack: {
            detail::PackPlan plan;
            return detail::pack_plan(p, pos.nest, pos.depth, plan);
        }
        case Action::Parallel:
            if (cur.parallel) return "the loop is already parallel";
            return parallel_rule(*p.comp, t, pos.nest, pos.depth);
        case Action::Fuse: {
            detail::FusePlan plan;
            return detail::fuse_plan(p, pos.nest, pos.depth, plan);
        }
        LT_SPLIT_CASES break;  // answered above, from split_factor
    }
    // clang-format on
    LT_CHECK(false, fmt::format("why_illegal: unhandled action {}", action_name(a)));
}

ApplyResult try_apply(const Program &p, Action a) {
    if (const char *why = why_illegal(p, a)) return {false, why, p};
    Program q = p;
    LoopTree::Pos pos = q.tree.pos(q.cursor);
    Nest &nest = q.tree.nests[size_t(pos.nest)];
    auto &loops = nest.loops;
    const size_t d = size_t(pos.depth);

    if (int f = split_factor(a)) {
        Loop cur = loops[d];
        int64_t inner = inner_coverage(nest, pos.depth);
        int64_t e = cur.size * inner + cur.tail;
        int64_t chunk = int64_t(f) * inner;
        // A parallel loop stays outermost: the outer part keeps the mark.
        Loop outer{cur.var, e / chunk, e % chunk, false, false, cur.parallel};
        Loop in{cur.var, f, 0, cur.unroll, cur.vectorize};
        loops[d] = outer;
        loops.insert(loops.begin() + std::ptrdiff_t(d) + 1, in);
        return {true, nullptr, std::move(q)};
    }
    switch (a) {
        case Action::Up: q.cursor -= 1; break;
        case Action::Down: q.cursor += 1; break;
        case Action::SwapUp:
            std::swap(loops[d], loops[d - 1]);
            q.cursor -= 1;
            break;
        case Action::SwapDown:
            std::swap(loops[d], loops[d + 1]);
            q.cursor += 1;
            break;
        case Action::Merge: {
            size_t pd = d;
            while (loops[--pd].var != loops[d].var) {}
            int64_t e = coverage(nest, int(pd));
            int64_t inner = inner_coverage(nest, int(d));
            loops.erase(loops.begin() + std::ptrdiff_t(d));
            // The merged loop stays parallel while it has iterations to share.
            const bool parallel = loops[pd].parallel && e / inner + (e % inner > 0) >= 2;
            loops[pd] = Loop{loops[pd].var, e / inner, e % inner, false, false, parallel};
            q.cursor -= int(d - pd);
            break;
        }
        case Action::Unroll: loops[d].unroll = true; break;
        // clang-format off
        case Action::Vectorize: loops[d].vectorize = true; break;
        case Action::Flatten: {
            FlattenPlan plan;
            LT_CHECK(!flatten_plan(p, p.tree.nests[size_t(pos.nest)], pos.depth, plan),
                     "flatten: legal above, illegal now");
            return {true, nullptr, apply_flatten(p, plan, pos)};
        }
        case Action::Pack: {
            detail::PackPlan plan;
            LT_CHECK(!detail::pack_plan(p, pos.nest, pos.depth, plan),
                     "pack: legal above, illegal now");
            return {true, nullptr, detail::apply_pack(p, plan)};
        }
        case Action::Parallel: loops[d].parallel = true; break;
        case Action::Fuse: {
            detail::FusePlan plan;
            LT_CHECK(!detail::fuse_plan(p, pos.nest, pos.depth, plan),
                     "fuse: legal above, illegal now");
            return {true, nullptr, detail::apply_fuse(p, plan)};
        }
        LT_SPLIT_CASES LT_CHECK(false, "splits are applied above");
    }
    // clang-format on
    return {true, nullptr, std::move(q)};
}

Program apply(const Program &p, Action a) {
    ApplyResult r = try_apply(p, a);
    if (!r.applied) throw Error(fmt::format("illegal action {}: {}", action_name(a), r.reason));
    return std::move(r.program);
}

std::vector<bool> action_mask(const Program &p, const ActionSpace &space) {
    std::vector<bool> mask(space.actions.size());
    for (size_t i = 0; i < space.actions.size(); ++i) mask[i] = is_legal(p, space.actions[i]);
    return mask;
}

std::vector<Action> parse_action_list(std::string_view text) {
    std::vector<Action> out;
    size_t i = 0;
    int position = 0;
    auto is_sep = [](char ch) { return ch == ',' || std::isspace(static_cast<unsigned char>(ch)); };
    while (i < text.size()) {
        while (i < text.size() && is_sep(text[i])) ++i;
        size_t j = i;
        while (j < text.size() && !is_sep(text[j])) ++j;
        if (j > i) {
            std::string_view tok = text.substr(i, j - i);
            ++position;
            auto a = parse_action(tok);
            if (!a)
                throw Error(fmt::format(
                    "unknown action '{}' at position {} (known: {})", tok, position, [] {
                        std::string s;
                        for (const auto &info : kActionInfo)
                            s += (s.empty() ? "" : ", ") + std::string(info.name);
                        return s;
                    }()));
            out.push_back(*a);
        }
        i = j;
    }
    return out;
}

namespace {
// Only these exact names make a first line a header. "Any first line without an action name"
// was the rule before, and it swallowed typos: `spilt_4` or `split_0` alone on the first line
// ran a different schedule with exit 0.
bool is_actions_header(std::string_view line) {
    auto is_sep = [](char ch) { return ch == ',' || std::isspace(static_cast<unsigned char>(ch)); };
    size_t b = 0, e = line.size();
    while (b < e && is_sep(line[b])) ++b;
    while (e > b && is_sep(line[e - 1])) --e;
    const std::string_view word = line.substr(b, e - b);
    return word == "action" || word == "actions";
}
}  // namespace

std::vector<Action> parse_action_csv(std::string_view text, const std::string &source) {
    std::vector<Action> out;
    size_t start = 0;
    int lineno = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string line(text.substr(start, end - start));
        ++lineno;
        start = end + 1;
        for (char &ch : line)
            if (ch == '"' || ch == '\'' || ch == '[' || ch == ']' || ch == ';' || ch == '\r')
                ch = ' ';
        if (lineno == 1 && is_actions_header(line)) continue;
        try {
            auto actions = parse_action_list(line);
            out.insert(out.end(), actions.begin(), actions.end());
        } catch (const Error &e) {
            throw Error(fmt::format("{}:{}: {}", source, lineno, e.what()));
        }
        if (end == text.size()) break;
    }
    return out;
}

}  // namespace looptool
