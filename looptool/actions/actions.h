// Cursor actions on a Program. Exact semantics: docs/actions.md.
//
// Every action is either legal, and then changes the state, or illegal with a reason; there
// are no silent no-ops. `try_apply` returns the reason as an ordinary result; `apply` throws
// looptool::Error naming the action and the reason.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "looptool/ir/loop_tree.h"

namespace looptool {

// The single list of actions: enum, name, and split factor (0 for non-splits). The splits are
// a sub-list, so a switch can name all of them in one line (LT_SPLIT_CASES) without `default:`.
#define LOOPTOOL_SPLITS(X)        \
    X(Split2, "split_2", 2)       \
    X(Split4, "split_4", 4)       \
    X(Split8, "split_8", 8)       \
    X(Split16, "split_16", 16)    \
    X(Split32, "split_32", 32)    \
    X(Split64, "split_64", 64)    \
    X(Split128, "split_128", 128) \
    X(Split256, "split_256", 256) \
    X(Split512, "split_512", 512) \
    X(Split1024, "split_1024", 1024)
#define LOOPTOOL_ACTIONS(X)      \
    X(Up, "up", 0)               \
    X(Down, "down", 0)           \
    X(SwapUp, "swap_up", 0)      \
    X(SwapDown, "swap_down", 0)  \
    LOOPTOOL_SPLITS(X)           \
    X(Merge, "merge", 0)         \
    X(Unroll, "unroll", 0)       \
    X(Vectorize, "vectorize", 0) \
    X(Flatten, "flatten", 0)     \
    X(Pack, "pack", 0)           \
    X(Parallel, "parallel", 0)   \
    X(Fuse, "fuse", 0)

/// `case Action::Split2: ... case Action::Split1024:`, every split. clang-format takes the macro
/// for a statement: the lines that use it are kept as written (`// clang-format off`).
#define LT_SPLIT_CASE(id, name, factor) case Action::id:
#define LT_SPLIT_CASES LOOPTOOL_SPLITS(LT_SPLIT_CASE)

enum class Action {
#define LT_ACTION_ENUM(id, name, factor) id,
    LOOPTOOL_ACTIONS(LT_ACTION_ENUM)
#undef LT_ACTION_ENUM
};

inline constexpr int kNumActions = 0
#define LT_ACTION_COUNT(id, name, factor) +1
    LOOPTOOL_ACTIONS(LT_ACTION_COUNT)
#undef LT_ACTION_COUNT
    ;

const char *action_name(Action a);
/// The names of `actions`, in order (what JSON output and Python return).
std::vector<std::string> action_names(const std::vector<Action> &actions);
/// 0 unless `a` is a split.
int split_factor(Action a);
std::optional<Action> parse_action(std::string_view name);
std::vector<Action> all_actions();

/// Largest unrolled body: product of the iteration counts of the unrolled loops in one nest.
inline constexpr int64_t kMaxUnrollProduct = 512;
/// Widest vectorized loop, in elements.
inline constexpr int64_t kMaxVectorWidth = 64;

/// An ordered subset of the actions: the agent's action space.
struct ActionSpace {
    std::string name;
    std::vector<Action> actions;

    /// `looptune` (LoopTune's 7 training actions), `full` (every action but the layout actions
    /// `flatten` and `pack`, `parallel` and `fuse`: the space the shipped policy was trained on,
    /// one network output per action), `layout` (`full`, the layout actions and `fuse`) or
    /// `threads` (`full`, the layout actions and `parallel`: policies/threads.policy's).
    /// Throws Error for an unknown name.
    static ActionSpace preset(std::string_view name);
    /// Index of `a` in this space, or -1.
    int index_of(Action a) const;
    size_t size() const { return actions.size(); }
};

/// nullptr when `a` is legal at the cursor (and changes the state); otherwise why not.
const char *why_illegal(const Program &p, Action a);
inline bool is_legal(const Program &p, Action a) { return why_illegal(p, a) == nullptr; }

struct ApplyResult {
    bool applied = false;
    const char *reason = nullptr;  // set when !applied
    Program program;               // the new state when applied, else the old one
};

ApplyResult try_apply(const Program &p, Action a);
/// Throws Error("illegal action <name>: <reason>") if the action is illegal.
Program apply(const Program &p, Action a);

/// mask[i] is true when space.actions[i] is legal.
std::vector<bool> action_mask(const Program &p, const ActionSpace &space);

/// Parses "split_4,down,..." (commas, whitespace or newlines). Throws Error naming the first
/// unknown action and its position.
std::vector<Action> parse_action_list(std::string_view text);

/// Parses an actions CSV: one action per line or per field, with or without a header line,
/// tolerating LoopTune's quoted list style (`['', 'split_16']`). Throws Error naming `source`,
/// the line and the unknown action.
std::vector<Action> parse_action_csv(std::string_view text, const std::string &source);

}  // namespace looptool
