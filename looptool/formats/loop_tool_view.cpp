#include "looptool/formats/loop_tool_view.h"

#include <fmt/format.h>

#include <algorithm>

#include "looptool/ir/error.h"

namespace looptool {

std::vector<std::string> split_fields(const std::string &s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char ch : s) {
        if (ch == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += ch;
        }
    }
    out.push_back(cur);
    return out;
}

namespace {

int64_t parse_int(const std::string &s, const std::string &what) {
    if (s.empty() || s.size() > 15 || s.find_first_not_of("-0123456789") != std::string::npos ||
        s.find('-', 1) != std::string::npos || s == "-")
        throw Error(fmt::format("{}: bad number '{}' in a view constraint", what, s));
    return std::stoll(s);
}

/// A parsed item: an affine form over symbol items, or size(symbol).
struct Value {
    Affine affine;     // Term::var holds the *item id* of a symbol until mapped
    int size_of = -1;  // size(symbol item), when >= 0
};

Affine add(const Affine &a, const Affine &b) {
    Affine r = a;
    r.offset += b.offset;
    for (const auto &t : b.terms) {
        auto it = std::find_if(r.terms.begin(), r.terms.end(),
                               [&](const Affine::Term &x) { return x.var == t.var; });
        if (it == r.terms.end())
            r.terms.push_back(t);
        else
            it->coef += t.coef;
    }
    std::erase_if(r.terms, [](const Affine::Term &t) { return t.coef == 0; });
    return r;
}

}  // namespace

std::optional<Affine> ViewConstraints::definition_over(int var,
                                                       const std::vector<int> &allowed) const {
    auto it = definitions.find(var);
    if (it == definitions.end()) return std::nullopt;
    for (const auto &a : it->second)
        if (std::all_of(a.terms.begin(), a.terms.end(), [&](const Affine::Term &t) {
                return std::find(allowed.begin(), allowed.end(), t.var) != allowed.end();
            }))
            return a;
    return std::nullopt;
}

ViewConstraints parse_view_constraints(const std::string &constraints, const std::string &symbols,
                                       const std::string &what) {
    // Symbol item -> variable.
    std::map<int, int> var_of;
    for (const auto &pair : split_fields(symbols, ',')) {
        if (pair.empty()) continue;
        auto kv = split_fields(pair, '=');
        if (kv.size() != 2) throw Error(fmt::format("{}: bad symbol mapping '{}'", what, pair));
        var_of[int(parse_int(kv[0], what))] = int(parse_int(kv[1], what));
    }
    std::vector<Value> items;
    std::vector<bool> is_symbol;
    auto get = [&](int64_t id) -> const Value & {
        if (id < 0 || size_t(id) >= items.size())
            throw Error(
                fmt::format("{}: view constraint refers to item {} before it exists", what, id));
        return items[size_t(id)];
    };
    auto mapped = [&](const Affine &a) {
        Affine r;
        r.offset = a.offset;
        for (const auto &t : a.terms) {
            auto it = var_of.find(t.var);
            if (it == var_of.end())
                throw Error(fmt::format("{}: view symbol item {} has no variable", what, t.var));
            r.terms.push_back({it->second, t.coef});
        }
        return r;
    };
    ViewConstraints out;
    for (const auto &constraint : split_fields(constraints, '/')) {
        if (constraint.empty()) continue;
        int lhs = -1, rhs = -1;
        bool in_rhs = false;
        for (std::string item : split_fields(constraint, ';')) {
            if (item.empty()) continue;
            if (item[0] == '=') {
                if (in_rhs) throw Error(fmt::format("{}: a view constraint with two '='", what));
                in_rhs = true;
                item = item.substr(1);
            }
            auto f = split_fields(item, '|');
            if (f.size() != 4 || f[1].size() != 1)
                throw Error(fmt::format("{}: bad view constraint item '{}'", what, item));
            Value v;
            const int id = int(items.size());
            bool symbol = false;
            switch (f[1][0]) {
                case 's': v.affine = Affine::of_var(id), symbol = true; break;
                case 'v': v.affine.offset = parse_int(f[2], what); break;
                case 'r': {
                    int64_t ref = parse_int(f[2], what);
                    v = get(ref);
                    symbol = is_symbol[size_t(ref)];
                    break;
                }
                case 'f': {
                    std::vector<int64_t> args;
                    for (const auto &a : split_fields(f[2], ','))
                        if (!a.empty()) args.push_back(parse_int(a, what));
                    const int64_t op = parse_int(f[0], what);
                    if (op == 1 && args.size() == 1 && get(args[0]).size_of < 0) {  // negate
                        v.affine = get(args[0]).affine;
                        v.affine.offset = -v.affine.offset;
                        for (auto &t : v.affine.terms) t.coef = -t.coef;
                    } else if (op == 5 && args.size() == 2 && get(args[0]).size_of < 0 &&
                               get(args[1]).size_of < 0) {  // add
                        v.affine = add(get(args[0]).affine, get(args[1]).affine);
                    } else if (op == 3 && args.size() == 1 &&
                               (get(args[0]), is_symbol[size_t(args[0])])) {  // size
                        v.size_of = get(args[0]).affine.terms[0].var;
                    } else {
                        throw Error(
                            fmt::format("{}: unsupported view constraint function {} of {} "
                                        "argument(s) (only negate, add and size)",
                                        what, op, args.size()));
                    }
                    break;
                }
                default:
                    throw Error(
                        fmt::format("{}: unknown view constraint item kind '{}'", what, f[1]));
            }
            items.push_back(v);
            is_symbol.push_back(symbol);
            (in_rhs ? rhs : lhs) = id;
        }
        if (lhs < 0 || rhs < 0)
            throw Error(fmt::format("{}: a view constraint without both sides", what));
        const Value &l = items[size_t(lhs)], &r = items[size_t(rhs)];
        if (l.size_of >= 0) {
            if (r.size_of >= 0 || !r.affine.terms.empty())
                throw Error(fmt::format("{}: a size constraint whose value is not a number", what));
            auto it = var_of.find(l.size_of);
            if (it == var_of.end())
                throw Error(
                    fmt::format("{}: view symbol item {} has no variable", what, l.size_of));
            out.sizes[it->second] = r.affine.offset;
        } else if (is_symbol[size_t(lhs)] && r.size_of < 0) {
            const int var = mapped(l.affine).terms[0].var;  // throws for an unmapped symbol
            out.definitions[var].push_back(mapped(r.affine));
        } else {
            throw Error(fmt::format(
                "{}: a view constraint that is neither 'var = affine' nor 'size(var) = n'", what));
        }
    }
    return out;
}

}  // namespace looptool
