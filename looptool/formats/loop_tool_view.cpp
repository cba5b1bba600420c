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

namespace {

/// Symbol item -> variable, from "item=var," pairs.
std::map<int, int> parse_symbols(const std::string &symbols, const std::string &what) {
    std::map<int, int> var_of;
    for (const auto &pair : split_fields(symbols, ',')) {
        if (pair.empty()) continue;
        auto kv = split_fields(pair, '=');
        if (kv.size() != 2) throw Error(fmt::format("{}: bad symbol mapping '{}'", what, pair));
        var_of[int(parse_int(kv[0], what))] = int(parse_int(kv[1], what));
    }
    return var_of;
}

/// The items parsed so far, in order (an item refers to earlier ones by id).
struct Items {
    const std::string &what;
    std::vector<Value> values;
    std::vector<bool> is_symbol;

    const Value &get(int64_t id) const {
        if (id < 0 || size_t(id) >= values.size())
            throw Error(
                fmt::format("{}: view constraint refers to item {} before it exists", what, id));
        return values[size_t(id)];
    }
};

/// A symbol's affine form over its variable instead of its item.
Affine mapped(const Affine &a, const std::map<int, int> &var_of, const std::string &what) {
    Affine r;
    r.offset = a.offset;
    for (const auto &t : a.terms) {
        auto it = var_of.find(t.var);
        if (it == var_of.end())
            throw Error(fmt::format("{}: view symbol item {} has no variable", what, t.var));
        r.terms.push_back({it->second, t.coef});
    }
    return r;
}

/// A function item ("op|f|args|"): negate, add, or size of a symbol.
Value parse_function(const std::vector<std::string> &f, const Items &items) {
    const std::string &what = items.what;
    Value v;
    std::vector<int64_t> args;
    for (const auto &a : split_fields(f[2], ','))
        if (!a.empty()) args.push_back(parse_int(a, what));
    const int64_t op = parse_int(f[0], what);
    if (op == 1 && args.size() == 1 && items.get(args[0]).size_of < 0) {  // negate
        v.affine = items.get(args[0]).affine;
        v.affine.offset = -v.affine.offset;
        for (auto &t : v.affine.terms) t.coef = -t.coef;
    } else if (op == 5 && args.size() == 2 && items.get(args[0]).size_of < 0 &&
               items.get(args[1]).size_of < 0) {  // add
        v.affine = add(items.get(args[0]).affine, items.get(args[1]).affine);
    } else if (op == 3 && args.size() == 1 &&
               (items.get(args[0]), items.is_symbol[size_t(args[0])])) {  // size
        v.size_of = items.get(args[0]).affine.terms[0].var;
    } else {
        throw Error(
            fmt::format("{}: unsupported view constraint function {} of {} "
                        "argument(s) (only negate, add and size)",
                        what, op, args.size()));
    }
    return v;
}

/// Parses one item ("op|kind|args|") and appends it to `items`; returns its id.
int parse_item(const std::string &item, Items &items) {
    const std::string &what = items.what;
    auto f = split_fields(item, '|');
    if (f.size() != 4 || f[1].size() != 1)
        throw Error(fmt::format("{}: bad view constraint item '{}'", what, item));
    Value v;
    const int id = int(items.values.size());
    bool symbol = false;
    switch (f[1][0]) {
        case 's': v.affine = Affine::of_var(id), symbol = true; break;
        case 'v': v.affine.offset = parse_int(f[2], what); break;
        case 'r': {
            int64_t ref = parse_int(f[2], what);
            v = items.get(ref);
            symbol = items.is_symbol[size_t(ref)];
            break;
        }
        case 'f': v = parse_function(f, items); break;
        default: throw Error(fmt::format("{}: unknown view constraint item kind '{}'", what, f[1]));
    }
    items.values.push_back(v);
    items.is_symbol.push_back(symbol);
    return id;
}

/// Records the constraint `lhs = rhs` (item ids) in `out`: a size or a definition.
void record_constraint(const Items &items, int lhs, int rhs, const std::map<int, int> &var_of,
                       ViewConstraints &out) {
    const std::string &what = items.what;
    const Value &l = items.values[size_t(lhs)], &r = items.values[size_t(rhs)];
    if (l.size_of >= 0) {
        if (r.size_of >= 0 || !r.affine.terms.empty())
            throw Error(fmt::format("{}: a size constraint whose value is not a number", what));
        auto it = var_of.find(l.size_of);
        if (it == var_of.end())
            throw Error(fmt::format("{}: view symbol item {} has no variable", what, l.size_of));
        out.sizes[it->second] = r.affine.offset;
    } else if (items.is_symbol[size_t(lhs)] && r.size_of < 0) {
        // mapped() throws for an unmapped symbol.
        const int var = mapped(l.affine, var_of, what).terms[0].var;
        out.definitions[var].push_back(mapped(r.affine, var_of, what));
    } else {
        throw Error(fmt::format(
            "{}: a view constraint that is neither 'var = affine' nor 'size(var) = n'", what));
    }
}

}  // namespace

ViewConstraints parse_view_constraints(const std::string &constraints, const std::string &symbols,
                                       const std::string &what) {
    const std::map<int, int> var_of = parse_symbols(symbols, what);
    Items items{what, {}, {}};
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
            (in_rhs ? rhs : lhs) = parse_item(item, items);
        }
        if (lhs < 0 || rhs < 0)
            throw Error(fmt::format("{}: a view constraint without both sides", what));
        record_constraint(items, lhs, rhs, var_of, out);
    }
    return out;
}

}  // namespace looptool
