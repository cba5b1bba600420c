// The `pack` layout action (looptool/actions/action_pack.h, docs/actions.md): the packed copy's
// layout, the cut variables, legality, and every packed kernel checked against the reference of the
// computation as the user wrote it (the JIT and the scheduled interpreter).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "looptool/actions/actions.h"
#include "looptool/check/interpreter.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/jit/export.h"
#include "looptool/jit/jit.h"
#include "looptool/lower/lower.h"
#include "looptool/lower/lower_fold.h"
#include "search/tile_schedules.h"
#include "test_util.h"

using namespace looptool;

namespace {

Program apply_all(Program p, const std::vector<Action> &as) {
    for (Action a : as) p = apply(p, a);
    return p;
}

// The packed program computes what `original` computes: JIT kernel and interpreter, on the
// original's buffers (the scratch copy is the kernel's own).
void expect_matches(const Program &p, const Computation &original, Jit &jit = tests::shared_jit()) {
    ASSERT_TRUE(same_storage(*p.comp, original));
    Buffers in = make_buffers(original, 11);
    const Reference want = compute_reference(original, in);
    Buffers got = in;
    fill_non_inputs(original, got, std::numeric_limits<float>::quiet_NaN());
    jit.compile(p).fn(got.pointers().data(), nullptr);
    Comparison c = compare_outputs(original, want, got, 1.0);
    EXPECT_TRUE(c.ok) << "JIT: " << c.first_mismatch << "\n" << dump(p, false);
    Buffers run = in;  // the interpreter's reductions start from the zeros make_buffers left
    run_schedule(p, run);
    c = compare_outputs(original, want, run, 1.0);
    EXPECT_TRUE(c.ok) << "interpreter: " << c.first_mismatch << "\n" << dump(p, false);
}

// A matmul's 8x32 register tile, n blocks outermost; the cursor ends on the m-block loop.
const std::vector<Action> kTileToMBlocks = {Action::Split8, Action::Down,    Action::SwapDown,
                                            Action::Down,   Action::Split32, Action::SwapUp,
                                            Action::SwapUp, Action::SwapUp,  Action::Down};

}  // namespace

// Under the m loop B is invariant: its 32-column panels become contiguous, n is cut in two.
TEST(Pack, MatmulCopiesPanelsOfBInTheTilesOrder) {
    auto c = std::make_shared<Computation>(make_matmul(20, 64, 24));  // m has a tail of 4
    Program p = apply_all(Program::naive(c), kTileToMBlocks);         // n, m, k, m', n'
    ASSERT_EQ(why_illegal(p, Action::Pack), nullptr) << why_illegal(p, Action::Pack);
    Program q = apply(p, Action::Pack);
    const Computation &k = *q.comp;
    ASSERT_EQ(k.tensors.size(), 5u);
    EXPECT_EQ(k.tensors[4].name, "B_packed");
    EXPECT_EQ(k.tensors[4].kind, TensorKind::Scratch);
    EXPECT_EQ(k.tensors[4].shape, (std::vector<int64_t>{2, 24, 32}));
    EXPECT_EQ(k.num_buffers(), 4u);
    EXPECT_EQ(k.vars[2].name, "n_o");
    EXPECT_EQ(k.vars[2].extent, 2);
    EXPECT_EQ(k.vars[3].name, "n_i");
    EXPECT_EQ(k.vars[3].extent, 32);
    EXPECT_EQ(format_stmt(k, k.stmts[0]), "B_packed[n_o, k, n_i] = B[k, 32*n_o+n_i]");
    EXPECT_EQ(format_stmt(k, k.stmts[1]), "T[m, 32*n_o+n_i] += A[m, k] * B_packed[n_o, k, n_i]");
    // The copy nest comes first, its innermost loop vectorized; the cursor stays on m.
    ASSERT_EQ(q.tree.nests.size(), 3u);
    EXPECT_EQ(q.tree.nests[0].stmts, std::vector<int>{0});
    EXPECT_TRUE(q.tree.nests[0].loops.back().vectorize);
    EXPECT_EQ(q.tree.loop(q.cursor).var, 0);
    EXPECT_EQ(q.tree.pos(q.cursor).nest, 1);
    expect_matches(q, *c);
    // The tile goes on as usual after the pack; every state checked.
    for (Action a : {Action::Down, Action::Down, Action::Unroll, Action::Down, Action::Vectorize}) {
        q = apply(q, a);
        expect_matches(q, *c);
    }
    // The text format keeps the scratch tensor.
    EXPECT_TRUE(parse_program(serialize(q)).same_as(q));
    EXPECT_NE(schedule_key(q), schedule_key(apply_all(p, {Action::Down, Action::Down})));
}

// A write nest whose n loop straddles the cut (64-wide chunks, 32-wide panels) is cut in two.
TEST(Pack, CutsOtherNestsLoopsWhereThePanelEnds) {
    auto c = std::make_shared<Computation>(make_matmul(9, 128, 10));
    Program p = Program::naive(c);
    p.cursor = 4;                                                          // the write nest's n
    p = apply_all(p, {Action::Split64, Action::Down, Action::Vectorize});  // m, n(2), n'(64) v
    p.cursor = 0;
    p = apply_all(p, kTileToMBlocks);
    Program q = apply(p, Action::Pack);
    const Nest &write = q.tree.nests[2];
    ASSERT_EQ(write.loops.size(), 4u);  // m, n_o 2 (64 = 2 panels), n_o 2, n_i 32 vectorized
    EXPECT_EQ(write.loops[2].size, 2);
    EXPECT_EQ(write.loops[3].size, 32);
    EXPECT_TRUE(write.loops[3].vectorize);
    expect_matches(q, *c);
}

// Under a conv's output-row loop the weights are invariant: blocks of 16 output channels
// become contiguous (oneDNN's Ohwi16o-like layout, in our c, kh, kw order).
TEST(Pack, ConvWeightsInBlocksOfOutputChannels) {
    auto c = std::make_shared<Computation>(make_conv2d(1, 3, 6, 9, 32, 3, 3));
    Program p = Program::naive(c);  // n, c, ho, wo, kh, kw, m | write nest
    p.cursor = 6;
    p = apply_all(p,
                  {Action::Split16, Action::SwapUp, Action::SwapUp, Action::SwapUp, Action::SwapUp,
                   Action::SwapUp, Action::SwapUp});  // m, n, c, ho, wo, kh, kw, m'
    p.cursor = 3;                                     // ho
    ASSERT_EQ(why_illegal(p, Action::Pack), nullptr) << why_illegal(p, Action::Pack);
    Program q = apply(p, Action::Pack);
    const Computation &k = *q.comp;
    EXPECT_EQ(k.tensors.back().name, "W_packed");
    EXPECT_EQ(k.tensors.back().shape, (std::vector<int64_t>{2, 3, 3, 3, 16}));
    expect_matches(q, *c);
    q = apply_all(q, {Action::Down, Action::Down, Action::Down, Action::Down, Action::Unroll});
    expect_matches(q, *c);
}

// Under output-channel blocks (m outermost) the weights are copied block by block: the copy
// nest shares the loops above the cursor with the conv (Nest::shared), and the lowering keeps
// one block of the copy (lower_fold.h): 16 channels' weights instead of all of them.
TEST(Pack, InsideChannelBlocksCopiesOneBlockAtATime) {
    auto c = std::make_shared<Computation>(make_conv2d(1, 3, 6, 9, 48, 3, 3));
    Program p = Program::naive(c);  // n, c, ho, wo, kh, kw, m | write nest
    p.cursor = 6;
    p = apply_all(p, {Action::Split16, Action::SwapUp, Action::SwapUp, Action::SwapUp,
                      Action::SwapUp, Action::SwapUp, Action::SwapUp});
    p = apply_all(p, {Action::Down, Action::Down, Action::SwapDown,
                      Action::SwapDown});  // m(3), n, ho, wo, c, kh, kw, m'(16)
    p.cursor = 2;                          // ho
    ASSERT_EQ(why_illegal(p, Action::Pack), nullptr) << why_illegal(p, Action::Pack);
    Program q = apply(p, Action::Pack);
    const Nest &copy = q.tree.nests[0], &conv = q.tree.nests[1];
    ASSERT_EQ(copy.shared, 2) << dump(q, true);  // m_o and n (n runs once)
    EXPECT_EQ(copy.loops[0], conv.loops[0]);
    EXPECT_EQ(q.comp->vars[size_t(copy.loops[0].var)].name, "m_o");
    EXPECT_EQ(q.tree.pos(q.cursor).nest, 1);
    EXPECT_EQ(q.comp->vars[size_t(q.tree.loop(q.cursor).var)].name, "ho");
    // The computation keeps every block (its semantics); the lowering folds m_o away.
    EXPECT_EQ(q.comp->tensors.back().shape, (std::vector<int64_t>{3, 3, 3, 3, 16}));
    Computation folded = *q.comp;
    EXPECT_EQ(detail::fold_scratch(folded, q.tree).log, std::vector<std::string>{"W_packed: m_o"});
    EXPECT_EQ(folded.tensors.back().shape, (std::vector<int64_t>{3, 3, 3, 16}));
    expect_matches(q, *c);
    EXPECT_EQ(serialize(parse_program(serialize(q), "round trip")), serialize(q));
    // The shared loops and the copy nest stay as `pack` made them; the rest goes on.
    for (int flat : {0, 1, 2, 5, 6, 7}) {  // the copy nest (0-5), the shared m_o and n
        Program r = q;
        r.cursor = flat;
        for (Action a : {Action::Split2, Action::SwapDown, Action::Unroll})
            EXPECT_FALSE(is_legal(r, a)) << flat << " " << action_name(a);
        EXPECT_TRUE(is_legal(r, Action::Down)) << flat;
    }
    q.cursor = q.tree.flat({1, 2});  // ho: below the shared loops, still free to split
    EXPECT_FALSE(is_legal(q, Action::SwapUp));
    q = apply_all(q, {Action::Split2, Action::Down, Action::Unroll});
    expect_matches(q, *c);
}

// k blocks outside, the tile inside: B's panels of one k block are copied per block, and the k
// block loop is both shared and cut (k = 256 k_o + k_i).
TEST(Pack, InsideKBlocksOfAMatmulTile) {
    auto mm = std::make_shared<Computation>(make_matmul(40, 128, 512));
    looptune::TileSchedule s;
    s.kb = 256;
    s.outer = "kmn";
    s.pack = true;
    Program q = apply_all(Program::naive(mm), looptune::tile_actions(*mm, s));
    ASSERT_EQ(q.tree.nests[0].shared, 1) << dump(q, true);
    EXPECT_EQ(q.comp->vars[size_t(q.tree.nests[0].loops[0].var)].name, "k_o");
    Computation folded = *q.comp;
    EXPECT_EQ(detail::fold_scratch(folded, q.tree).log, std::vector<std::string>{"B_packed: k_o"});
    expect_matches(q, *mm);
    // "nkm": n blocks, then k blocks, both outside the m loop, the block's k inside it: k is
    // cut where the block starts as well, so the lowering keeps one 256 x 32 block of P, not
    // one 512 x 32 panel per n block (a P as large as B's k, beyond L2 on deep shapes).
    s.outer = "nkm";
    q = apply_all(Program::naive(mm), looptune::tile_actions(*mm, s));
    ASSERT_EQ(q.tree.nests[0].shared, 2) << dump(q, true);
    folded = *q.comp;
    EXPECT_EQ(detail::fold_scratch(folded, q.tree).log,
              std::vector<std::string>{"B_packed: n_o, k_o"});
    EXPECT_EQ(folded.tensors.back().shape, (std::vector<int64_t>{256, 32}));
    expect_matches(q, *mm);
    // Where k's extent is not a multiple of the block, that cut cannot be made: B is packed
    // whole k panels per n block, and the lowering indexes P's k from the block's start, so it
    // still keeps one 256 x 32 block (the last one 88 rows).
    auto ragged = std::make_shared<Computation>(make_matmul(40, 128, 600));
    q = apply_all(Program::naive(ragged), looptune::tile_actions(*ragged, s));
    EXPECT_EQ(q.comp->tensors.back().shape, (std::vector<int64_t>{4, 600, 32}));
    folded = *q.comp;
    const detail::FoldedScratch f = detail::fold_scratch(folded, q.tree);
    EXPECT_EQ(f.log, std::vector<std::string>{"B_packed: n_o, k from the block's start"});
    EXPECT_EQ(f.block_relative, std::vector<int>{int(folded.tensors.size()) - 1});
    EXPECT_EQ(folded.tensors.back().shape, (std::vector<int64_t>{256, 32}));
    expect_matches(q, *ragged);
}

// A whole pack of A cuts k where the tile's k blocks end; B is then read as B[256*k_o + k_i, n]
// and can still be packed block by block: both inputs in the order the tile reads them.
TEST(Pack, BothInputsOnceTheFirstPackCutTheOthersDimension) {
    auto mm = std::make_shared<Computation>(make_matmul(40, 128, 512));
    looptune::TileSchedule s;
    s.kb = 256;
    s.outer = "nkm";  // n blocks, k blocks, m blocks: A is invariant in the outermost loop
    Program p = apply_all(Program::naive(mm), looptune::tile_actions(*mm, s));
    p.cursor = p.tree.flat({0, 0});
    ASSERT_EQ(why_illegal(p, Action::Pack), nullptr) << why_illegal(p, Action::Pack);
    p = apply(p, Action::Pack);  // A, whole: before the nest, not inside its loops
    ASSERT_EQ(p.comp->tensors.back().name, "A_packed");
    ASSERT_EQ(p.tree.nests[0].shared, 0);
    p = apply_all(p, {Action::Down, Action::Down});  // the m-block loop: B is invariant there
    ASSERT_EQ(why_illegal(p, Action::Pack), nullptr) << why_illegal(p, Action::Pack);
    Program q = apply(p, Action::Pack);
    EXPECT_EQ(q.comp->tensors.back().name, "B_packed");
    std::vector<std::string> dims;
    for (const Affine &f : q.comp->stmts[0].out.index)
        dims.push_back(q.comp->vars[size_t(f.terms[0].var)].name);
    EXPECT_EQ(dims, (std::vector<std::string>{"n_o", "k_o", "k_i", "n_i"})) << dump(q, true);
    expect_matches(q, *mm);
}

TEST(Pack, SharedLoopsMustMatchTheNextNest) {
    auto c = std::make_shared<Computation>(make_conv2d(1, 3, 6, 9, 48, 3, 3));
    Program p = Program::naive(c);
    p.cursor = 6;
    p = apply_all(p, {Action::Split16, Action::SwapUp, Action::SwapUp, Action::SwapUp,
                      Action::SwapUp, Action::SwapUp, Action::SwapUp});
    p.cursor = 3;
    Program q = apply(p, Action::Pack);
    ASSERT_GT(q.tree.nests[0].shared, 0);
    LoopTree bad = q.tree;
    bad.nests[1].loops[0].unroll = true;
    EXPECT_THROW(validate_loop_tree(*q.comp, bad), Error);
    bad = q.tree;
    bad.nests[0].shared = int(bad.nests[0].loops.size());
    EXPECT_THROW(validate_loop_tree(*q.comp, bad), Error);
    bad = q.tree;
    bad.nests.erase(bad.nests.begin() + 1, bad.nests.end());
    EXPECT_THROW(validate_loop_tree(*q.comp, bad), Error);
}

TEST(Pack, IllegalWhereNothingWouldChangeOrTheCutDoesNotDivide) {
    Program naive = tests::matmul_program(8, 64, 8);  // m, k, n: B already in its own layout
    EXPECT_STREQ(why_illegal(naive, Action::Pack),
                 "the nest already walks the input in its own layout");
    naive.cursor = 1;  // k: both inputs use it
    EXPECT_STREQ(why_illegal(naive, Action::Pack),
                 "no input of the nest is invariant in this loop");
    // n = 48 in 32-wide panels: the cut does not divide n, so n stays whole, which is B's own
    // layout (and B's rows, 192 bytes, start lines already: nothing to pad).
    Program odd = apply_all(tests::matmul_program(16, 48, 8), kTileToMBlocks);
    EXPECT_STREQ(why_illegal(odd, Action::Pack),
                 "the nest already walks the input in its own layout");
    // Once packed, B is read only by the copy nest: a second pack of it is illegal there.
    Program q = apply(apply_all(tests::matmul_program(16, 64, 8), kTileToMBlocks), Action::Pack);
    EXPECT_NE(why_illegal(q, Action::Pack), nullptr);
    EXPECT_EQ(ActionSpace::preset("full").index_of(Action::Pack), -1);
    EXPECT_GE(ActionSpace::preset("layout").index_of(Action::Pack), 0);
}

// n = 40: the 32-wide panels do not divide it, and B's rows (160 bytes) do not start lines.
// B is copied in its own layout with its rows padded to 16 floats (64 bytes): every row of
// the copy starts a line. Nothing is cut; inside the n blocks, block by block.
TEST(Pack, PadsRowsThatDoNotStartALineWhereTheCutCannotBeMade) {
    auto c = std::make_shared<Computation>(make_matmul(16, 40, 8));
    Program p = apply_all(Program::naive(c), kTileToMBlocks);  // n (1 r 8), m, k, m', n'
    ASSERT_EQ(why_illegal(p, Action::Pack), nullptr) << why_illegal(p, Action::Pack);
    Program q = apply(p, Action::Pack);
    const Computation &k = *q.comp;
    EXPECT_EQ(k.vars, c->vars);
    EXPECT_EQ(k.tensors.back().shape, (std::vector<int64_t>{8, 48}));
    EXPECT_EQ(format_stmt(k, k.stmts[0]), "B_packed[k, n] = B[k, n]");
    EXPECT_EQ(format_stmt(k, k.stmts[1]), "T[m, n] += A[m, k] * B_packed[k, n]");
    EXPECT_EQ(q.tree.nests[0].shared, 1);  // inside the n blocks
    // The lowering keeps one block: 8 rows of 32 columns (the last block 8), a line each.
    Computation folded = k;
    EXPECT_EQ(detail::fold_scratch(folded, q.tree).log,
              std::vector<std::string>{"B_packed: n from the block's start"});
    EXPECT_EQ(folded.tensors.back().shape, (std::vector<int64_t>{8, 32}));
    expect_matches(q, *c);
    for (Action a : {Action::Down, Action::Down, Action::Unroll, Action::Down, Action::Vectorize}) {
        q = apply(q, a);
        expect_matches(q, *c);
    }
    EXPECT_TRUE(parse_program(serialize(q)).same_as(q));
    // Rows shorter than two lines are not padded (n = 24: 96 bytes).
    EXPECT_STREQ(why_illegal(tests::matmul_program(8, 24, 8), Action::Pack),
                 "the nest already walks the input in its own layout");
    // The naive m, k, n nest walks B in its own layout: under m the whole of B is copied
    // before the nest, padded, its rows (100 floats, longer than a vector) 16 floats at a time.
    auto wide = std::make_shared<Computation>(make_matmul(5, 100, 7));
    Program w = Program::naive(wide);
    ASSERT_EQ(why_illegal(w, Action::Pack), nullptr) << why_illegal(w, Action::Pack);
    Program whole = apply(w, Action::Pack);
    EXPECT_EQ(whole.comp->tensors.back().shape, (std::vector<int64_t>{7, 112}));
    const Nest &copy = whole.tree.nests[0];
    EXPECT_EQ(copy.shared, 0);
    ASSERT_EQ(copy.loops.size(), 3u);  // k, n (6 r 4), n' (16, vectorized)
    EXPECT_EQ(copy.loops[1].size, 6);
    EXPECT_EQ(copy.loops[1].tail, 4);
    EXPECT_EQ(copy.loops[2].size, 16);
    EXPECT_TRUE(copy.loops[2].vectorize);
    expect_matches(whole, *wide);
    // Every packed member of the `tile` family on a shape whose n no panel divides and whose
    // rows do not start lines (m and k ragged too).
    auto odd = std::make_shared<Computation>(make_matmul(37, 100, 300));
    int packed = 0;
    for (const looptune::TileSchedule &s : looptune::schedule_family(37, 100, 300, true)) {
        if (!s.pack) continue;
        const auto actions = looptune::tile_actions(*odd, s);
        const Program t = apply_all(Program::naive(odd), actions);
        EXPECT_EQ(t.comp->tensors.back().shape.back(), 112) << s.name();
        expect_matches(t, *odd);
        ++packed;
    }
    EXPECT_EQ(packed, 10);
}

// A padded copy of B made block by block (n = 1500: rows 6000 bytes, no 64-column panel divides
// it; k blocks of 128) holds one block, indexed from its start: 128 x 64 floats, every row a
// line apart, instead of a 1280 x 1504 copy of B. The same kernel in the lowering's generic
// fallback (plain loops, flat addressing) indexes it the same way.
TEST(Pack, APaddedCopyMadeBlockByBlockHoldsOneBlock) {
    auto mm = std::make_shared<Computation>(make_matmul(12, 1500, 300));
    looptune::TileSchedule s;
    s.tm = 4;
    s.tn = 64;
    s.kb = 128;
    s.outer = "nkm";
    s.pack = true;
    const Program q = apply_all(Program::naive(mm), looptune::tile_actions(*mm, s));
    ASSERT_EQ(q.comp->tensors.back().name, "B_packed");
    EXPECT_EQ(q.comp->tensors.back().shape, (std::vector<int64_t>{300, 1504})) << dump(q, true);
    ASSERT_EQ(q.tree.nests[0].shared, 2) << dump(q, true);  // n blocks, k blocks
    Computation folded = *q.comp;
    EXPECT_EQ(detail::fold_scratch(folded, q.tree).log,
              std::vector<std::string>{"B_packed: k, n from the block's start"});
    EXPECT_EQ(folded.tensors.back().shape, (std::vector<int64_t>{128, 64}));
    expect_matches(q, *mm);
    JitOptions generic;
    generic.lower.max_emission_cost = 1;
    EXPECT_GE(lower_to_llvm_ir(q, "k", generic.lower).summary.generic_nests, 1);
    expect_matches(q, *mm, *Jit::create(generic));
}

// B strided along n (B[n, k], attention's K) under 32-wide panels that do not divide n = 37:
// n cannot be cut, so it stays whole where its panel's columns are (B_packed[k, n], K^T), rows
// padded to 48 floats; the tile's tail panel reads the same rows. The copy transposes 16 rows
// at a time in registers, the last 5 rows element by element. Block by block inside the
// panels, B_packed holds one panel, indexed from its start.
TEST(Pack, KeepsAVariableWholeWhereItsPanelsLeaveATail) {
    auto c = std::make_shared<Computation>(parse_program(R"(looptool-program 1
name bt
var m 21
var k 64
var n 37
tensor A input 21 64
tensor B input 37 64
tensor T temp 21 37
tensor C output 21 37
stmt T[m, n] += A[m, k] * B[n, k]
stmt C[m, n] = T[m, n]
nest 0
loop m 21 0
loop k 64 0
loop n 37 0
nest 1
loop m 21 0
loop n 37 0
cursor 0
)")
                                               .computation());
    // m (2 r 5), n (1 r 5), k, m', n': the cursor on m, under the n panels or above them.
    const std::vector<Action> mn = {Action::Split8,  Action::Down,   Action::SwapDown, Action::Down,
                                    Action::Split32, Action::SwapUp, Action::SwapUp,   Action::Up};
    const Program whole = apply(apply_all(Program::naive(c), mn), Action::Pack);
    const Computation &k = *whole.comp;
    EXPECT_EQ(k.vars, c->vars);
    EXPECT_EQ(k.tensors.back().shape, (std::vector<int64_t>{64, 48}));
    EXPECT_EQ(format_stmt(k, k.stmts[0]), "B_packed[k, n] = B[n, k]");
    EXPECT_EQ(format_stmt(k, k.stmts[1]), "T[m, n] += A[m, k] * B_packed[k, n]");
    const Nest &copy = whole.tree.nests[0];
    ASSERT_EQ(copy.loops.size(), 3u);  // n (2 r 5), k, n' (16)
    EXPECT_EQ(copy.loops[0].size, 2);
    EXPECT_EQ(copy.loops[0].tail, 5);
    EXPECT_EQ(copy.loops[2].size, 16);
    EXPECT_EQ(lower_to_llvm_ir(whole, "k", {}).summary.transposed_copies, 1);
    expect_matches(whole, *c);
    // n panels outermost: one 64 x 32 panel at a time (the last one 5 wide).
    const Program block = apply(apply_all(Program::naive(c), kTileToMBlocks), Action::Pack);
    EXPECT_EQ(block.tree.nests[0].shared, 1);
    Computation folded = *block.comp;
    EXPECT_EQ(detail::fold_scratch(folded, block.tree).log,
              std::vector<std::string>{"B_packed: n from the block's start"});
    EXPECT_EQ(folded.tensors.back().shape, (std::vector<int64_t>{64, 32}));
    expect_matches(block, *c);
    // Further actions on the packed tile keep computing the same.
    std::mt19937_64 rng(3);
    for (int i = 0; i < 12; ++i)
        expect_matches(
            tests::random_walk(i % 2 ? block : whole, rng, 8, ActionSpace::preset("layout")), *c);
}

// Random walks of the `layout` space after a pack (further packs, splits, swaps, merges,
// flattens): every state computes the original matmul.
TEST(Pack, RandomLayoutSequencesAfterAPackVerify) {
    std::mt19937_64 rng(17);
    const ActionSpace space = ActionSpace::preset("layout");
    for (int i = 0; i < 40; ++i) {
        auto c = std::make_shared<Computation>(make_matmul(9 + i % 13, 64, 16 + i % 7));
        Program p = apply(apply_all(Program::naive(c), kTileToMBlocks), Action::Pack);
        p = tests::random_walk(p, rng, 10, space);
        expect_matches(p, *c);
    }
}

// An exported packed kernel allocates its copy itself: the C signature is unchanged.
TEST(Pack, ExportsWithTheSameSignature) {
    auto c = std::make_shared<Computation>(make_matmul(16, 64, 8, "mm16_64_8"));
    Program q = apply(apply_all(Program::naive(c), kTileToMBlocks), Action::Pack);
    ExportedKernel packed = export_kernel(q), plain = export_kernel(Program::naive(c));
    const std::string signature = "void mm16_64_8(const float *A, const float *B, float *C);";
    EXPECT_NE(plain.header.find(signature), std::string::npos) << plain.header;
    EXPECT_NE(packed.header.find(signature), std::string::npos) << packed.header;
}

// The `tile` template's packed members (the `layout` space): matmul tiles with B's panels
// packed, with and without a k block, and conv tiles with W packed; every one verified.
TEST(Pack, TileTemplateMembersWithPackingMatchTheReference) {
    auto mm = std::make_shared<Computation>(make_matmul(40, 128, 512));
    int packed = 0;
    for (const looptune::TileSchedule &s : looptune::schedule_family(40, 128, 512, true)) {
        if (!s.pack) continue;
        const auto actions = looptune::tile_actions(*mm, s);
        ASSERT_EQ(actions.back(), Action::Pack) << s.name();
        expect_matches(apply_all(Program::naive(mm), actions), *mm);
        ++packed;
    }
    EXPECT_EQ(packed, 10);
    EXPECT_EQ(looptune::schedule_family(40, 128, 512).size() + 16,  // and 6 with A packed
              looptune::schedule_family(40, 128, 512, true).size());
    auto conv = std::make_shared<Computation>(make_conv2d(1, 3, 9, 21, 16, 3, 3));
    packed = 0;
    for (const looptune::ConvTileSchedule &s : looptune::conv_schedule_family(16, 19, 0, true)) {
        if (!s.pack) continue;
        const Program p = apply_all(Program::naive(conv), looptune::conv_tile_actions(*conv, s));
        EXPECT_EQ(p.comp->tensors.back().name, "W_packed") << s.name();
        if (s.vector_m) {  // output channels innermost and vectorized, columns unrolled
            const Loop &last = p.tree.nests[1].loops.back();
            EXPECT_TRUE(last.vectorize) << s.name();
            EXPECT_EQ(p.comp->vars[size_t(last.var)].name[0], 'm') << s.name();
            EXPECT_TRUE(p.tree.nests[1].loops[p.tree.nests[1].loops.size() - 2].unroll) << s.name();
        }
        expect_matches(p, *conv);
        ++packed;
    }
    EXPECT_GE(packed, 8);
    // A 7-column image: the vm tile over two rows (ho split by 2, a tail of 1 on 7 rows).
    auto narrow = std::make_shared<Computation>(make_conv2d(1, 4, 9, 9, 32, 3, 3));
    int two_rows = 0;
    for (const looptune::ConvTileSchedule &s : looptune::conv_schedule_family(32, 7, 0, true)) {
        if (s.th < 2) continue;
        const Program p =
            apply_all(Program::naive(narrow), looptune::conv_tile_actions(*narrow, s));
        expect_matches(p, *narrow);
        ++two_rows;
    }
    EXPECT_EQ(two_rows, 1);
    // Input channels in blocks (cb): the block loop right below the output rows, W's channel
    // dimension cut in two by the pack.
    auto deep = std::make_shared<Computation>(make_conv2d(2, 32, 5, 12, 64, 3, 3));
    int blocked = 0;
    for (const looptune::ConvTileSchedule &s : looptune::conv_schedule_family(64, 10, 0, true)) {
        if (s.cb == 0) continue;
        const Program p = apply_all(Program::naive(deep), looptune::conv_tile_actions(*deep, s));
        const std::vector<Loop> &loops = p.tree.nests[1].loops;
        const int ho = p.comp->var_index("ho"), c = p.comp->var_index("c");
        size_t d = 0;
        while (d + 1 < loops.size() && loops[d].var != ho) ++d;
        ASSERT_LT(d + 1, loops.size()) << s.name() << dump(p);
        EXPECT_EQ(loops[d + 1].var, c) << s.name() << dump(p);
        EXPECT_EQ(loops[d + 1].size, 32 / s.cb) << s.name() << dump(p);
        expect_matches(p, *deep);
        ++blocked;
    }
    EXPECT_EQ(blocked, 4);  // 64x4 and 32x8, blocks of 8 and 16
}

// A conv's weights packed with the output channels innermost is a transpose: emitted as 16x16
// blocks transposed in registers when the channels, rows and columns of W it copies are one
// contiguous run (a multiple of 16 long) and the channel block a multiple of 16, in a copy
// before the nest (batch 2) and in one block by block inside its shared loops (batch 1).
TEST(Pack, AWeightTransposeIsEmittedInRegistersAndMatchesTheReference) {
    for (int64_t batch : {2, 1})
        for (int64_t ci : {32, 3}) {
            auto conv = std::make_shared<Computation>(make_conv2d(batch, ci, 6, 12, 64, 3, 3));
            for (int tm : {32, 64, 16}) {
                const looptune::ConvTileSchedule s{tm, 8, "mh", false, true, true};
                const Program p =
                    apply_all(Program::naive(conv), looptune::conv_tile_actions(*conv, s));
                SCOPED_TRACE(fmt::format("{} {}", conv->name, s.name()));
                // Block by block when the output channels are cut in blocks, under a batch
                // loop that runs once.
                EXPECT_EQ(p.tree.nests[0].shared > 0, batch == 1 && tm < 64) << dump(p);
                // 9 * 32 = 288 elements of W per channel, 27 with 3 input channels (no
                // multiple of 16: scalar copies).
                EXPECT_EQ(lower_to_llvm_ir(p).summary.transposed_copies, ci == 32 ? 1 : 0);
                expect_matches(p, *conv);
            }
        }
}

// A packed under the n loop: each tm-row block of A becomes [k][m_i], a transpose of 8 or 16
// rows in registers (looptool_transpose8 / 16), in the m blocks ("mn": block by block) or
// before the nest ("nm": whole). Every member of the family with A packed matches the reference.
TEST(Pack, ATileWithAPackedTransposesItsRowBlocksInRegisters) {
    auto mm = std::make_shared<Computation>(make_matmul(48, 64, 96));
    int members = 0;
    for (const looptune::TileSchedule &s : looptune::schedule_family(48, 64, 96, true)) {
        if (!s.pack_a) continue;
        SCOPED_TRACE(s.name());
        const Program p = apply_all(Program::naive(mm), looptune::tile_actions(*mm, s));
        EXPECT_EQ(p.comp->tensors.back().name, "A_packed") << dump(p);
        EXPECT_EQ(p.tree.nests[0].shared > 0, s.outer == "mn") << dump(p);
        const LoweredIR ir = lower_to_llvm_ir(p);
        EXPECT_EQ(ir.summary.transposed_copies, 1) << dump(p);
        EXPECT_NE(ir.ir.find(fmt::format("define internal void @looptool_transpose{}", s.tm)),
                  std::string::npos);
        expect_matches(p, *mm);
        ++members;
    }
    EXPECT_EQ(members, 6);  // 8x32, 8x16, 16x16, each "mn" and "nm"
    // 40 rows: no 16-row blocks, so m stays whole: A_packed is A^T ([k][m], rows padded to a
    // line), still transposed in registers, 8 rows at a time.
    auto forty = std::make_shared<Computation>(make_matmul(40, 64, 96));
    looptune::TileSchedule s{16, 16, 0, "nm"};
    s.pack_a = true;
    const Program p = apply_all(Program::naive(forty), looptune::tile_actions(*forty, s));
    EXPECT_EQ(p.comp->tensors.back().shape, (std::vector<int64_t>{96, 48})) << dump(p);
    EXPECT_EQ(lower_to_llvm_ir(p).summary.transposed_copies, 1) << dump(p);
    expect_matches(p, *forty);
}

// The transpose is one function, not code in every kernel: a module lowered on its own
// defines it (internal, so an exported object stands alone); a JIT's kernels only declare it
// and one Jit compiles it once for all of them (its runtime module). Two different packed
// kernels from one Jit both match the reference.
TEST(Pack, AJitCompilesTheWeightTransposeOnceForAllItsKernels) {
    auto conv = std::make_shared<Computation>(make_conv2d(1, 32, 6, 12, 64, 3, 3));
    const Program p =
        apply_all(Program::naive(conv),
                  looptune::conv_tile_actions(
                      *conv, looptune::ConvTileSchedule{32, 8, "mh", false, true, true}));
    const LoweredIR alone = lower_to_llvm_ir(p);
    ASSERT_EQ(alone.summary.transposed_copies, 1) << dump(p);
    EXPECT_NE(alone.ir.find("define internal void @looptool_transpose16"), std::string::npos);
    LowerOptions shared;
    shared.shared_runtime = true;
    const std::string ir = lower_to_llvm_ir(p, "k", shared).ir;
    EXPECT_NE(ir.find("declare void @looptool_transpose16"), std::string::npos);
    EXPECT_EQ(ir.find("define internal void @looptool_transpose16"), std::string::npos);

    auto jit = Jit::create();
    EXPECT_NE(jit->llvm_ir(p).find("declare void @looptool_transpose16"), std::string::npos);
    auto other = std::make_shared<Computation>(make_conv2d(2, 16, 5, 20, 32, 3, 3));
    const Program q =
        apply_all(Program::naive(other),
                  looptune::conv_tile_actions(
                      *other, looptune::ConvTileSchedule{16, 8, "mh", false, true, true}));
    ASSERT_EQ(lower_to_llvm_ir(q).summary.transposed_copies, 1) << dump(q);
    for (const auto &[prog, c] : {std::pair{p, conv}, std::pair{q, other}}) {
        Buffers in = make_buffers(*c, 5);
        const Reference want = compute_reference(*c, in);
        Buffers got = in;
        fill_non_inputs(*c, got, std::numeric_limits<float>::quiet_NaN());
        jit->compile(prog).fn(got.pointers().data(), nullptr);
        const Comparison r = compare_outputs(*c, want, got, 1.0);
        EXPECT_TRUE(r.ok) << r.first_mismatch << "\n" << dump(prog, false);
    }
}

// A pack that cuts the output's variable in two (the conv's output channels m = 32 * m_o + m_i,
// a matmul's n = 64 * n_o + n_i) still lets the tile compute straight into the output from
// zero: the write nest `Y = T` is elided and nothing is zeroed first. Before, the output's cut
// index was not recognised as covering it, and a 32x8 vm conv tile kept T, its zeroing, strided
// loads of T and the write nest: 22 ms to compile against 17 (jit_latency_bench compile_conv).
TEST(Pack, ATileOverCutOutputVariablesWritesTheOutputDirectly) {
    auto conv = std::make_shared<Computation>(make_conv2d(1, 32, 6, 12, 64, 3, 3));
    auto mm = std::make_shared<Computation>(make_matmul(16, 256, 48));
    const std::vector<std::pair<std::shared_ptr<Computation>, std::vector<Action>>> cases = {
        {conv, looptune::conv_tile_actions(
                   *conv, looptune::ConvTileSchedule{32, 8, "mh", false, true, true})},
        {mm, looptune::tile_actions(*mm, looptune::TileSchedule{4, 64, 0, "nm", true, 0, true})}};
    for (const auto &[c, actions] : cases) {
        const Program p = apply_all(Program::naive(c), actions);
        SCOPED_TRACE(dump(p));
        ASSERT_NE(p.comp->var_index(c == conv ? "m_o" : "n_o"), -1) << "the pack cut the variable";
        const LoweringSummary s = lower_to_llvm_ir(p).summary;
        EXPECT_TRUE(s.copy_elided);
        EXPECT_EQ(s.zero_start_tiles, s.register_tiles);
        EXPECT_TRUE(s.zeroed_tensors.empty());
        expect_matches(p, *c);
    }
}
