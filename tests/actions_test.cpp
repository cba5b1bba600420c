// Cursor actions: structure and cursor after each action, tails, legality, presets and parsing.
// The semantics tested here are the ones documented in docs/actions.md.
#include "looptool/actions/actions.h"

#include <gtest/gtest.h>

#include <set>

#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptool;
using looptool::tests::matmul_program;

namespace {
constexpr int M = 0, K = 1, N = 2;  // make_matmul's variable ids

Loop L(int var, int64_t size, int64_t tail = 0, bool unroll = false, bool vec = false) {
    return Loop{var, size, tail, unroll, vec};
}

const std::vector<Loop> &compute(const Program &p) { return p.tree.nests[0].loops; }

Program apply_all(Program p, const std::vector<Action> &as) {
    for (Action a : as) p = apply(p, a);
    return p;
}

// Every applied action must keep the tree valid and the computation unchanged.
void expect_valid_and_correct(const Program &p) {
    EXPECT_NO_THROW(validate_loop_tree(*p.comp, p.tree));
    Comparison c = verify_schedule(p, 7);
    EXPECT_TRUE(c.ok) << c.first_mismatch;
}

std::string illegal_message(const Program &p, Action a) {
    try {
        apply(p, a);
    } catch (const Error &e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST(Actions, TheListHasUniqueNamesAndSplitFactors) {
    EXPECT_EQ(kNumActions, 21);
    std::set<std::string> names;
    for (Action a : all_actions()) {
        names.insert(action_name(a));
        EXPECT_EQ(parse_action(action_name(a)), a);
    }
    EXPECT_EQ(names.size(), size_t(kNumActions));
    int64_t f = 2;
    for (Action a : all_actions())
        if (split_factor(a)) {
            EXPECT_EQ(split_factor(a), f) << action_name(a);
            EXPECT_EQ(std::string(action_name(a)), "split_" + std::to_string(f));
            f *= 2;
        }
    EXPECT_EQ(f, 2048);  // split_2 .. split_1024
    EXPECT_EQ(split_factor(Action::Merge), 0);
    EXPECT_FALSE(parse_action("split_3").has_value());
    EXPECT_FALSE(parse_action("").has_value());
    EXPECT_FALSE(parse_action("UP").has_value());
}

TEST(Actions, Presets) {
    ActionSpace lt = ActionSpace::preset("looptune");
    EXPECT_EQ(lt.name, "looptune");
    EXPECT_EQ(lt.actions,
              (std::vector<Action>{Action::Up, Action::Down, Action::SwapUp, Action::SwapDown,
                                   Action::Split4, Action::Split8, Action::Split16}));
    EXPECT_EQ(lt.index_of(Action::Split8), 5);
    EXPECT_EQ(lt.index_of(Action::Merge), -1);
    // `full` stays the 17 actions the shipped policy has one output each for; `layout` adds
    // `flatten`, `pack` and `fuse`, last; `threads` is `full`, `flatten`, `pack` and `parallel`
    // (threads.policy's outputs; fuse_test.cpp: `fuse`).
    ActionSpace full = ActionSpace::preset("full");
    EXPECT_EQ(full.size(), size_t(17));
    EXPECT_EQ(full.index_of(Action::Flatten), -1);
    EXPECT_EQ(full.index_of(Action::Vectorize), 16);
    ActionSpace layout = ActionSpace::preset("layout");
    EXPECT_EQ(layout.size(), size_t(kNumActions) - 1);
    EXPECT_EQ(layout.index_of(Action::Parallel), -1);
    ActionSpace threads = ActionSpace::preset("threads");
    EXPECT_EQ(threads.size(), size_t(kNumActions) - 1);
    EXPECT_EQ(threads.index_of(Action::Parallel), 19);
    EXPECT_EQ(threads.index_of(Action::Fuse), -1);
    EXPECT_EQ(layout.index_of(Action::Flatten), 17);
    EXPECT_EQ(full.index_of(Action::Pack), -1);
    EXPECT_EQ(layout.index_of(Action::Pack), 18);
    try {
        ActionSpace::preset("tiny");
        FAIL() << "expected an Error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("tiny"), std::string::npos);
    }
}

TEST(Actions, UpAndDownMoveTheCursorAcrossNests) {
    Program p = matmul_program(8, 8, 8);  // loops: m k n | m n
    EXPECT_FALSE(is_legal(p, Action::Up));
    EXPECT_NE(illegal_message(p, Action::Up).find("illegal action up"), std::string::npos);
    Program q = apply_all(p, {Action::Down, Action::Down, Action::Down});
    EXPECT_EQ(q.cursor, 3);  // first loop of the write nest
    EXPECT_EQ(q.tree, p.tree);
    q = apply(q, Action::Down);
    EXPECT_EQ(q.cursor, 4);
    EXPECT_FALSE(is_legal(q, Action::Down));
    EXPECT_NE(illegal_message(q, Action::Down).find("illegal action down"), std::string::npos);
    EXPECT_EQ(apply(q, Action::Up).cursor, 3);
}

TEST(Actions, SwapsExchangeNeighboursAndTheCursorFollows) {
    Program p = matmul_program(8, 8, 8);
    Program q = apply(p, Action::SwapDown);
    EXPECT_EQ(compute(q), (std::vector<Loop>{L(K, 8), L(M, 8), L(N, 8)}));
    EXPECT_EQ(q.cursor, 1);
    Program r = apply(q, Action::SwapUp);
    EXPECT_TRUE(r.same_as(p));
    // swap_up at the outermost loop and swap_down at the innermost are illegal, also at the
    // nest boundary (no swapping between nests).
    EXPECT_FALSE(is_legal(p, Action::SwapUp));
    Program inner = apply_all(p, {Action::Down, Action::Down});
    EXPECT_FALSE(is_legal(inner, Action::SwapDown));
    Program write = apply(inner, Action::Down);
    EXPECT_FALSE(is_legal(write, Action::SwapUp));
    EXPECT_NE(illegal_message(write, Action::SwapUp).find("swap_up"), std::string::npos);
}

TEST(Actions, SwappingTwoLoopsOfTheSameVariableIsIllegal) {
    Program p = apply(matmul_program(32, 8, 8), Action::Split4);  // m 8, m' 4
    EXPECT_FALSE(is_legal(p, Action::SwapDown));
    Program q = apply(p, Action::Down);
    EXPECT_FALSE(is_legal(q, Action::SwapUp));
    EXPECT_NE(illegal_message(q, Action::SwapUp).find("same variable"), std::string::npos);
    EXPECT_TRUE(is_legal(q, Action::SwapDown));  // m' and k differ
}

TEST(Actions, SplitFollowsLoopToolsTailArithmetic) {
    Program p = matmul_program(37, 8, 8);
    Program q = apply(p, Action::Split4);  // E = 37 -> outer (37 / 4, 37 % 4), inner (4, 0)
    EXPECT_EQ(compute(q), (std::vector<Loop>{L(M, 9, 1), L(M, 4), L(K, 8), L(N, 8)}));
    EXPECT_EQ(q.cursor, 0);  // the cursor stays on the outer part
    expect_valid_and_correct(q);
    // Splitting the outer loop again: inner coverage 4, E = 9 * 4 + 1 = 37, f * inner = 8.
    Program r = apply(q, Action::Split2);
    EXPECT_EQ(compute(r), (std::vector<Loop>{L(M, 4, 5), L(M, 2), L(M, 4), L(K, 8), L(N, 8)}));
    expect_valid_and_correct(r);
    // Splitting an inner loop that itself has a tail (m' covers 2 * 4 = 8 here, no tail; make
    // one with a tail): m 37 -> split_8 -> m (4 r 5), m' 8; m' -> split_4 -> m' (2), m'' (4).
    Program s = apply_all(p, {Action::Split8, Action::Down, Action::Split4});
    EXPECT_EQ(compute(s), (std::vector<Loop>{L(M, 4, 5), L(M, 2), L(M, 4), L(K, 8), L(N, 8)}));
    EXPECT_EQ(s.cursor, 1);
    // Splitting a loop with a tail relative to its inner loop: m (4 r 5) by 2 -> E = 37,
    // chunk 16 -> (2 r 5), new inner (2, 0) above m' (8).
    Program t = apply_all(p, {Action::Split8, Action::Split2});
    EXPECT_EQ(compute(t), (std::vector<Loop>{L(M, 2, 5), L(M, 2), L(M, 8), L(K, 8), L(N, 8)}));
    expect_valid_and_correct(t);
}

TEST(Actions, SplitMustLeaveAnOuterLoopOfTwoOrMoreIterations) {
    Program p = matmul_program(3, 4, 5);
    EXPECT_FALSE(is_legal(p, Action::Split4));  // larger than the extent
    EXPECT_NE(illegal_message(p, Action::Split4).find("illegal action split_4"), std::string::npos);
    EXPECT_TRUE(is_legal(p, Action::Split2));  // 3 -> (1 r 1), (2)
    EXPECT_EQ(compute(apply(p, Action::Split2)),
              (std::vector<Loop>{L(M, 1, 1), L(M, 2), L(K, 5), L(N, 4)}));
    Program n = apply_all(p, {Action::Down, Action::Down});  // n = 4
    EXPECT_FALSE(is_legal(n, Action::Split4));  // exactly the extent: a no-op, so illegal
    EXPECT_TRUE(is_legal(n, Action::Split2));
    Program one = matmul_program(1, 1, 1);
    for (Action a : all_actions()) {
        if (split_factor(a)) EXPECT_FALSE(is_legal(one, a)) << action_name(a);
    }
    // A split of the outer part is judged on its whole coverage: m 64 -> split_16 -> m (4),
    // m' (16); split_4 of m needs 4 * 16 = 64 < 64: illegal; split_2 gives (2), (2), (16).
    Program q = apply(matmul_program(64, 4, 4), Action::Split16);
    EXPECT_FALSE(is_legal(q, Action::Split4));
    EXPECT_TRUE(is_legal(q, Action::Split2));
}

TEST(Actions, SplitMovesAnnotationsToTheInnerPart) {
    Program p =
        apply_all(matmul_program(4, 64, 32), {Action::Down, Action::Down, Action::Vectorize});
    EXPECT_TRUE(compute(p)[2].vectorize);
    Program q = apply(p, Action::Split16);
    EXPECT_EQ(compute(q),
              (std::vector<Loop>{L(M, 4), L(K, 32), L(N, 4), L(N, 16, 0, false, true)}));
    expect_valid_and_correct(q);
    Program u = apply_all(matmul_program(4, 4, 32), {Action::Down, Action::Unroll, Action::Split8});
    EXPECT_EQ(compute(u), (std::vector<Loop>{L(M, 4), L(K, 4), L(K, 8, 0, true), L(N, 4)}));
}

TEST(Actions, MergeUndoesASplitAndRecomputesTheTail) {
    Program p = matmul_program(37, 8, 8);
    Program q = apply_all(p, {Action::Split4, Action::Down});
    EXPECT_EQ(q.cursor, 1);
    Program r = apply(q, Action::Merge);
    EXPECT_EQ(r.tree, p.tree);
    EXPECT_EQ(r.cursor, 0);  // the cursor moves to the merged loop
    // Three levels with tails: m (4 r 5), m' (2), m'' (4); merging m'' into m' gives
    // m' covering 8 and m becomes (37 / 8, 37 % 8) = (4 r 5), m' (8).
    Program s = apply_all(p, {Action::Split8, Action::Down, Action::Split4, Action::Down});
    EXPECT_EQ(s.cursor, 2);
    Program t = apply(s, Action::Merge);
    EXPECT_EQ(compute(t), (std::vector<Loop>{L(M, 4, 5), L(M, 8), L(K, 8), L(N, 8)}));
    EXPECT_EQ(t.cursor, 1);
    expect_valid_and_correct(t);
    // Merging m' (2) into m (4 r 5) across the remaining m'' (4): m covers 37 in chunks of 4.
    Program u = apply(apply(s, Action::Up), Action::Merge);
    EXPECT_EQ(compute(u), (std::vector<Loop>{L(M, 9, 1), L(M, 4), L(K, 8), L(N, 8)}));
    EXPECT_EQ(u.cursor, 0);
    expect_valid_and_correct(u);
    // Merge looks through loops of other variables for the nearest same-variable parent.
    Program v = apply_all(p, {Action::Split4, Action::Down, Action::SwapDown});  // m k m' n
    EXPECT_EQ(v.cursor, 2);
    Program w = apply(v, Action::Merge);
    EXPECT_EQ(compute(w), (std::vector<Loop>{L(M, 37), L(K, 8), L(N, 8)}));
    EXPECT_EQ(w.cursor, 0);
}

TEST(Actions, MergeNeedsAnEnclosingLoopOfTheSameVariable) {
    Program p = matmul_program(8, 8, 8);
    for (int c = 0; c < p.tree.num_loops(); ++c) {
        p.cursor = c;
        EXPECT_FALSE(is_legal(p, Action::Merge)) << "cursor " << c;
    }
    p.cursor = 0;
    EXPECT_NE(illegal_message(p, Action::Merge).find("illegal action merge"), std::string::npos);
    // The outer part of a split has no same-variable parent either.
    EXPECT_FALSE(is_legal(apply(p, Action::Split2), Action::Merge));
}

TEST(Actions, MergeDropsTheAnnotationsOfBothLoops) {
    Program p = apply_all(matmul_program(4, 64, 4),
                          {Action::Down, Action::Down, Action::Split8, Action::Unroll, Action::Down,
                           Action::Vectorize, Action::Merge});
    EXPECT_EQ(compute(p), (std::vector<Loop>{L(M, 4), L(K, 4), L(N, 64)}));
}

TEST(Actions, Unroll) {
    Program p = matmul_program(8, 8, 4);
    Program q = apply(p, Action::Unroll);
    EXPECT_TRUE(compute(q)[0].unroll);
    EXPECT_EQ(q.cursor, 0);
    EXPECT_FALSE(is_legal(q, Action::Unroll));                        // already unrolled
    EXPECT_FALSE(is_legal(matmul_program(1, 8, 8), Action::Unroll));  // one iteration
    // A loop (1 r 1) runs two iterations (one full, one tail) and can be unrolled.
    Program tail = apply(matmul_program(3, 8, 8), Action::Split2);
    EXPECT_EQ(compute(tail)[0], L(M, 1, 1));
    EXPECT_TRUE(is_legal(tail, Action::Unroll));
    // The product of unrolled iteration counts in a nest is limited to kMaxUnrollProduct.
    Program big = apply_all(matmul_program(64, 64, 64), {Action::Unroll, Action::Down});
    EXPECT_GT(64 * 64, kMaxUnrollProduct);
    EXPECT_FALSE(is_legal(big, Action::Unroll));
    EXPECT_NE(illegal_message(big, Action::Unroll).find("unroll"), std::string::npos);
    Program ok = apply_all(matmul_program(64, 64, 8), {Action::Unroll, Action::Down});
    EXPECT_TRUE(is_legal(ok, Action::Unroll));  // 64 * 8 = 512
    expect_valid_and_correct(apply(ok, Action::Unroll));
}

TEST(Actions, VectorizeOnlyTheInnermostLoopOfANest) {
    Program p = matmul_program(8, 64, 8);
    EXPECT_FALSE(is_legal(p, Action::Vectorize));  // m is not innermost
    EXPECT_NE(illegal_message(p, Action::Vectorize).find("innermost"), std::string::npos);
    Program n = apply_all(p, {Action::Down, Action::Down});
    Program v = apply(n, Action::Vectorize);
    EXPECT_TRUE(compute(v)[2].vectorize);
    EXPECT_EQ(v.cursor, 2);
    EXPECT_FALSE(is_legal(v, Action::Vectorize));  // already
    EXPECT_FALSE(is_legal(v, Action::Unroll));     // vectorized loops are not unrolled
    EXPECT_FALSE(is_legal(v, Action::SwapUp));     // it must stay innermost
    EXPECT_FALSE(is_legal(apply(v, Action::Up), Action::SwapDown));
    expect_valid_and_correct(v);
    // Too wide, a single iteration, or already unrolled.
    EXPECT_FALSE(is_legal(apply_all(matmul_program(8, 65, 8), {Action::Down, Action::Down}),
                          Action::Vectorize));
    EXPECT_TRUE(is_legal(apply_all(matmul_program(8, 64, 8), {Action::Down, Action::Down}),
                         Action::Vectorize));
    EXPECT_FALSE(is_legal(apply_all(matmul_program(8, 1, 8), {Action::Down, Action::Down}),
                          Action::Vectorize));
    EXPECT_FALSE(is_legal(apply(n, Action::Unroll), Action::Vectorize));
    // The write nest's innermost loop can be vectorized too.
    Program w = apply_all(p, {Action::Down, Action::Down, Action::Down, Action::Down});
    EXPECT_TRUE(is_legal(w, Action::Vectorize));
}

TEST(Actions, IllegalActionsAreReportedNotApplied) {
    Program p = matmul_program(8, 8, 8);
    ApplyResult r = try_apply(p, Action::Up);
    EXPECT_FALSE(r.applied);
    ASSERT_NE(r.reason, nullptr);
    EXPECT_TRUE(r.program.same_as(p));
    ApplyResult ok = try_apply(p, Action::Down);
    EXPECT_TRUE(ok.applied);
    EXPECT_EQ(ok.reason, nullptr);
    EXPECT_EQ(ok.program.cursor, 1);
    // A cursor off the tree makes everything illegal.
    p.cursor = 99;
    for (Action a : all_actions()) EXPECT_FALSE(is_legal(p, a)) << action_name(a);
}

// The mask is exactly the legality, every legal action changes the state (no silent no-ops),
// every illegal one throws an Error naming it, and every result is a valid, correct tree.
TEST(Actions, MaskIsLegalAndStateChangingOnRandomPrograms) {
    std::mt19937_64 rng(42);
    const ActionSpace full = ActionSpace::preset("full");
    const ActionSpace lt = ActionSpace::preset("looptune");
    int legal = 0, illegal = 0;
    for (int trial = 0; trial < 60; ++trial) {
        Program p = tests::random_walk(tests::random_matmul(rng, 4096), rng, 12);
        auto mask = action_mask(p, full);
        auto lt_mask = action_mask(p, lt);
        for (size_t i = 0; i < lt.size(); ++i)
            EXPECT_EQ(lt_mask[i], mask[size_t(full.index_of(lt.actions[i]))]);
        for (size_t i = 0; i < full.size(); ++i) {
            Action a = full.actions[i];
            EXPECT_EQ(mask[i], is_legal(p, a));
            if (mask[i]) {
                ++legal;
                Program q = apply(p, a);
                EXPECT_FALSE(q.same_as(p)) << action_name(a) << " is a no-op on\n"
                                           << schedule_key(p);
                EXPECT_NO_THROW(validate_loop_tree(*q.comp, q.tree)) << action_name(a);
                EXPECT_GE(q.cursor, 0);
                EXPECT_LT(q.cursor, q.tree.num_loops());
            } else {
                ++illegal;
                EXPECT_NE(
                    illegal_message(p, a).find(std::string("illegal action ") + action_name(a)),
                    std::string::npos);
            }
        }
    }
    EXPECT_GT(legal, 100);
    EXPECT_GT(illegal, 100);
}

TEST(ActionParsing, List) {
    EXPECT_EQ(parse_action_list("split_4,down  up\nswap_up,,"),
              (std::vector<Action>{Action::Split4, Action::Down, Action::Up, Action::SwapUp}));
    EXPECT_TRUE(parse_action_list("").empty());
    EXPECT_TRUE(parse_action_list(" , \n").empty());
    try {
        parse_action_list("down,split_5,up");
        FAIL() << "expected an Error";
    } catch (const Error &e) {
        std::string m = e.what();
        EXPECT_NE(m.find("split_5"), std::string::npos) << m;
        EXPECT_NE(m.find("position 2"), std::string::npos) << m;
    }
}

TEST(ActionParsing, CsvWithHeaderPerLineAndPerField) {
    EXPECT_EQ(parse_action_csv("action\nsplit_4\r\ndown\n\nswap_up\n", "a.csv"),
              (std::vector<Action>{Action::Split4, Action::Down, Action::SwapUp}));
    EXPECT_EQ(parse_action_csv("split_4,down\nup", "a.csv"),
              (std::vector<Action>{Action::Split4, Action::Down, Action::Up}));
    // LoopTune's results files hold Python lists with an empty first element.
    EXPECT_EQ(parse_action_csv("['', 'split_16', 'down', 'swap_down']", "a.csv"),
              (std::vector<Action>{Action::Split16, Action::Down, Action::SwapDown}));
    EXPECT_EQ(parse_action_csv("\"['', 'split_4']\"\n", "a.csv"),
              (std::vector<Action>{Action::Split4}));
    EXPECT_TRUE(parse_action_csv("", "a.csv").empty());
    EXPECT_TRUE(parse_action_csv("actions\n", "a.csv").empty());
    EXPECT_EQ(parse_action_csv("\"actions\"\r\nup\r\n", "a.csv"), std::vector<Action>{Action::Up});
}

TEST(ActionParsing, CsvErrorsNameTheFileTheLineAndTheAction) {
    auto message = [](std::string_view text) {
        try {
            parse_action_csv(text, "seq.csv");
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    std::string m = message("action\nsplit_4\nspilt_8\n");
    EXPECT_NE(m.find("seq.csv:3"), std::string::npos) << m;
    EXPECT_NE(m.find("spilt_8"), std::string::npos) << m;
    // A header only counts on the first line, and only as exactly `action` or `actions`.
    m = message("split_4\naction\n");
    EXPECT_NE(m.find("seq.csv:2"), std::string::npos) << m;
    // A typo alone on the first line is an action that does not exist, not a header.
    for (std::string typo :
         {"spilt_4", "split_0", "split_-4", "Actions", "action,split_4", "step"}) {
        m = message(typo + "\nsplit_4\n");
        EXPECT_NE(m.find("seq.csv:1"), std::string::npos) << typo << ": " << m;
        EXPECT_NE(m.find("unknown action"), std::string::npos) << typo << ": " << m;
    }
    m = message("split_4,bogus\n");
    EXPECT_NE(m.find("seq.csv:1"), std::string::npos) << m;
    EXPECT_NE(m.find("bogus"), std::string::npos) << m;
}

// `flatten` on a 1x1 conv: output rows and columns become one loop and one tensor dimension
// (the buffers keep their layout), then the usual tile over it; every step verified.
TEST(Flatten, FusesOutputRowsAndColumnsOfA1x1Conv) {
    auto c = std::make_shared<Computation>(make_conv2d(1, 5, 6, 7, 3, 1, 1));
    Program p = Program::naive(c);  // n, c, ho, wo, kh, kw, m | n, ho, wo, m
    p.cursor = 2;                   // ho
    ASSERT_EQ(why_illegal(p, Action::Flatten), nullptr);
    Program q = apply(p, Action::Flatten);
    const Computation &f = *q.comp;
    EXPECT_EQ(f.vars.size(), 6u);
    EXPECT_EQ(f.vars[2].name, "ho_wo");
    EXPECT_EQ(f.vars[2].extent, 42);
    EXPECT_EQ(f.tensors[0].shape, (std::vector<int64_t>{1, 5, 42}));    // X
    EXPECT_EQ(f.tensors[1].shape, (std::vector<int64_t>{3, 5, 1, 1}));  // W untouched
    EXPECT_EQ(f.tensors[3].shape, (std::vector<int64_t>{1, 3, 42}));    // Y
    EXPECT_TRUE(same_storage(f, *c));
    EXPECT_EQ(q.cursor, 2);
    EXPECT_EQ(q.tree.nests[0].loops.size(), 6u);
    EXPECT_EQ(q.tree.nests[1].loops.size(), 3u);
    EXPECT_EQ(q.tree.nests[1].loops[1].size, 42);
    EXPECT_TRUE(verify_schedule(q).ok);
    // The fused loop schedules like any other: split, move inward, vectorize.
    for (Action a : {Action::Split16, Action::Down, Action::SwapDown, Action::SwapDown,
                     Action::SwapDown, Action::Vectorize}) {
        q = apply(q, a);
        EXPECT_TRUE(verify_schedule(q).ok) << action_name(a) << "\n" << dump(q, false);
    }
}

TEST(Flatten, IllegalWhereTheLayoutWouldChange) {
    // 3x3 conv: X's columns are wo + kw (kw spans 3), not wo alone.
    Program conv = Program::naive(std::make_shared<Computation>(make_conv2d(1, 2, 6, 7, 3, 3, 3)));
    conv.cursor = 2;
    ASSERT_NE(why_illegal(conv, Action::Flatten), nullptr);
    EXPECT_STREQ(why_illegal(conv, Action::Flatten),
                 "the second variable's dimension has other terms");
    // matmul m, k, n: A[m, k] fuses but T[m, n] uses m without k.
    Program mm = matmul_program(4, 5, 6);
    EXPECT_NE(why_illegal(mm, Action::Flatten), nullptr);
    mm.cursor = 1;  // k, n: A[m, k] has k without n
    EXPECT_NE(why_illegal(mm, Action::Flatten), nullptr);
    mm.cursor = 2;  // innermost
    EXPECT_STREQ(why_illegal(mm, Action::Flatten), "the loop is the innermost of its nest");
    // Split or swapped loops: not adjacent and whole any more.
    Program add = Program::naive(std::make_shared<Computation>(make_elementwise_add(6, 10)));
    ASSERT_EQ(why_illegal(add, Action::Flatten), nullptr);
    EXPECT_NE(why_illegal(apply(add, Action::Split2), Action::Flatten), nullptr);
    EXPECT_NE(why_illegal(apply(add, Action::SwapDown), Action::Flatten), nullptr);
    Program flat = apply(add, Action::Flatten);
    EXPECT_EQ(flat.comp->tensors[0].shape, (std::vector<int64_t>{60}));
    EXPECT_TRUE(verify_schedule(flat).ok);
    EXPECT_NE(why_illegal(flat, Action::Flatten), nullptr);  // one loop left
}

// Random legal sequences of the `layout` space on 1x1 convs and elementwise adds, flatten
// among them: every one verified against the interpreter.
TEST(Flatten, RandomLayoutSequencesVerify) {
    std::mt19937_64 rng(15);
    const ActionSpace space = ActionSpace::preset("layout");
    int flattened = 0;
    for (int i = 0; i < 120; ++i) {
        auto c =
            std::make_shared<Computation>(i % 2 ? make_conv2d(1, 3, 5 + i % 4, 7 + i % 3, 4, 1, 1)
                                                : make_elementwise_add(3 + i % 5, 17 + i % 3));
        Program p = Program::naive(c);
        p.cursor = i % p.tree.num_loops();
        if (i % 3 == 0 && is_legal(p, Action::Flatten)) p = apply(p, Action::Flatten);
        p = tests::random_walk(p, rng, 12, space);
        flattened += p.comp->vars.size() < c->vars.size();
        ASSERT_TRUE(verify_schedule(p).ok) << dump(p, false);
    }
    EXPECT_GT(flattened, 20);
}
