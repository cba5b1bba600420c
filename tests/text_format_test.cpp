// Text forms: dump examples, exact serialization round trips, parse errors, file helpers.
#include "looptool/formats/text_format.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "looptool/check/verify.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptool;
using looptool::tests::matmul_program;

namespace {
constexpr int M = 0, K = 1, N = 2;

void expect_round_trip(const Program &p) {
    const std::string text = serialize(p);
    Program q = parse_program(text, "rt");
    EXPECT_EQ(serialize(q), text);
    EXPECT_TRUE(q.same_as(p)) << text;
    EXPECT_EQ(schedule_key(q), schedule_key(p));
}

// A computation that uses every operator, constants and affine indices with coefficients
// and offsets, so the statement printer and parser are exercised beyond matmul.
Computation all_ops_computation() {
    Computation c;
    c.name = "all_ops";
    c.vars = {{"m", 4}, {"n", 5}};
    c.tensors = {{"A", {4, 5}, TensorKind::Input},
                 {"B", {9, 7}, TensorKind::Input},
                 {"C", {4, 5}, TensorKind::Output}};
    auto v = [](int x) { return Affine::of_var(x); };
    Access a{0, {v(0), v(1)}};
    Access b1{1, {Affine{{{0, 2}}, 1}, Affine{{{1, 1}}, 2}}};    // B[2*m+1, n+2]
    Access b2{1, {Affine{{{0, -2}}, 8}, Affine{{{1, -1}}, 4}}};  // B[-2*m+8, -n+4]
    Access out{2, {v(0), v(1)}};
    auto R = [](Access x) { return Expr::read(std::move(x)); };
    Expr e = Expr::binary(
        OpKind::Add,
        Expr::binary(
            OpKind::Max,
            Expr::binary(OpKind::Sub, Expr::binary(OpKind::Mul, R(a), Expr::constant(0.5f)),
                         Expr::binary(OpKind::Div, R(b1), Expr::constant(3))),
            Expr::constant(-1.25f)),
        Expr::binary(
            OpKind::Min, Expr::unary(OpKind::Exp, Expr::unary(OpKind::Neg, R(a))),
            Expr::binary(OpKind::Sub, Expr::unary(OpKind::Sqrt, Expr::unary(OpKind::Abs, R(b2))),
                         Expr::binary(OpKind::Sub, Expr::constant(1e-5f), Expr::constant(0.1f)))));
    c.stmts.push_back({out, ReduceKind::None, e});
    c.validate();
    return c;
}

std::string parse_error(const std::string &text) {
    try {
        parse_program(text, "t.lt");
    } catch (const Error &e) {
        return e.what();
    }
    return "<no error>";
}

std::string replace(std::string s, const std::string &from, const std::string &to) {
    auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
}
}  // namespace

TEST(Dump, NaiveMatmulInLoopToolStyle) {
    Program p = matmul_program(64, 32, 16);
    EXPECT_EQ(dump(p),
              "for m in 64 : L0 <<<<<< cursor\n"
              " for k in 16 : L1\n"
              "  for n in 32 : L2\n"
              "   T[m, n] += A[m, k] * B[k, n]\n"
              "for m in 64 : L3\n"
              " for n in 32 : L4\n"
              "  C[m, n] = T[m, n]\n");
    EXPECT_EQ(dump(p, false).find("cursor"), std::string::npos);
}

TEST(Dump, TailsAnnotationsPrimesAndCursor) {
    Program p = matmul_program(36, 8, 8);
    // k, m (2), n, m' (4 r 2), m'' (4): m' covers 4 * 4 + 2 = 18, m covers 2 * 18 = 36.
    p.tree.nests[0].loops = {Loop{K, 8}, Loop{M, 2}, Loop{N, 8}, Loop{M, 4, 2, true, false},
                             Loop{M, 4, 0, false, true}};
    p.cursor = 3;
    ASSERT_NO_THROW(validate_loop_tree(*p.comp, p.tree));
    EXPECT_EQ(dump(p),
              "for k in 8 : L0\n"
              " for m in 2 : L1\n"
              "  for n in 8 : L2\n"
              "   for m' in 4 r 2 : L3 [unroll] <<<<<< cursor\n"
              "    for m'' in 4 : L4 [vectorize]\n"
              "     T[m, n] += A[m, k] * B[k, n]\n"
              "for m in 36 : L5\n"
              " for n in 8 : L6\n"
              "  C[m, n] = T[m, n]\n");
    Comparison c = verify_schedule(p);
    EXPECT_TRUE(c.ok) << c.first_mismatch;
    expect_round_trip(p);
}

TEST(Serialize, ExactTextOfANaiveMatmul) {
    EXPECT_EQ(serialize(matmul_program(4, 3, 2)),
              "looptool-program 1\n"
              "name mm4_3_2\n"
              "var m 4\nvar k 2\nvar n 3\n"
              "tensor A input 4 2\ntensor B input 2 3\ntensor T temp 4 3\ntensor C output 4 3\n"
              "stmt T[m, n] += A[m, k] * B[k, n]\n"
              "stmt C[m, n] = T[m, n]\n"
              "nest 0\nloop m 4 0\nloop k 2 0\nloop n 3 0\n"
              "nest 1\nloop m 4 0\nloop n 3 0\n"
              "cursor 0\n");
}

TEST(Serialize, RoundTripsRandomMatmulSchedules) {
    std::mt19937_64 rng(2024);
    for (int i = 0; i < 300; ++i) {
        Program p = tests::random_walk(tests::random_matmul(rng, 1 << 22), rng, 20);
        expect_round_trip(p);
    }
}

TEST(Serialize, RoundTripsConvAndElementwiseSchedules) {
    std::mt19937_64 rng(7);
    auto conv = std::make_shared<Computation>(make_conv2d(2, 3, 9, 7, 4, 3, 2));
    auto add = std::make_shared<Computation>(make_elementwise_add(37, 129));
    for (int i = 0; i < 100; ++i) {
        expect_round_trip(tests::random_walk(Program::naive(conv), rng, 20));
        expect_round_trip(tests::random_walk(Program::naive(add), rng, 20));
    }
    // The conv's affine accesses survive the text form.
    Program p = parse_program(serialize(Program::naive(conv)));
    EXPECT_EQ(format_stmt(*p.comp, p.comp->stmts[0]),
              "T[n, m, ho, wo] += X[n, c, ho+kh, wo+kw] * W[m, c, kh, kw]");
}

TEST(Serialize, RoundTripsEveryOperatorConstantAndAffineIndex) {
    auto c = std::make_shared<Computation>(all_ops_computation());
    Program p = Program::naive(c);
    expect_round_trip(p);
    Program q = parse_program(serialize(p));
    EXPECT_EQ(*q.comp, *c);
    // The parsed program computes the same values.
    Buffers a = make_buffers(*c, 3), b = make_buffers(*q.comp, 3);
    run_reference(*c, a);
    run_reference(*q.comp, b);
    EXPECT_EQ(a.data, b.data);
}

TEST(Serialize, EveryOpOfTheListRoundTrips) {
    // The parser reads op names from the op list (ir.h): a new op is parsed once it is listed.
    for (OpKind op : all_ops()) {
        if (op_arity(op) == 0) continue;
        Computation c = make_elementwise_add(3, 4, std::string("op_") + op_name(op));
        const Expr a = c.stmts[0].value.args[0], b = c.stmts[0].value.args[1];
        c.stmts[0].value = op_arity(op) == 2 ? Expr::binary(op, a, b) : Expr::unary(op, a);
        auto comp = std::make_shared<Computation>(c);
        Program p = Program::naive(comp);
        expect_round_trip(p);
        EXPECT_EQ(*parse_program(serialize(p)).comp, *comp) << op_name(op);
        const std::string spelled =
            *op_infix(op) ? std::string(" ") + op_infix(op) + " " : std::string(op_name(op)) + "(";
        EXPECT_NE(serialize(p).find(spelled), std::string::npos) << serialize(p);
    }
}

TEST(Parse, AcceptsCommentsAndBlankLines) {
    std::string text = serialize(matmul_program(4, 4, 4));
    text = replace(text, "nest 0\n", "\n# the compute nest\nnest 0\n   \n");
    Program p = parse_program(text);
    EXPECT_TRUE(p.same_as(matmul_program(4, 4, 4)));
}

TEST(Parse, ErrorsNameTheSourceAndLine) {
    const std::string good = serialize(matmul_program(4, 4, 4));
    // Line numbers: 1 header, 2 name, 3-5 vars, 6-9 tensors, 10-11 stmts, 12 nest, 13-15
    // loops, 16 nest, 17-18 loops, 19 cursor.
    struct Case {
        std::string text, want;
    } cases[] = {
        {"", "t.lt: empty file"},
        {replace(good, "looptool-program 1", "looptool-program 2"),
         "t.lt:1: unsupported format version 2"},
        {replace(good, "looptool-program 1", "hello"), "t.lt:1: expected the header"},
        {replace(good, "cursor 0\n", ""), "t.lt: truncated"},
        {good.substr(0, good.size() / 2), "t.lt"},
        {replace(good, "nest 1\nloop m", "nest 1\nloop q"), "t.lt:17: unknown variable 'q'"},
        {replace(good, "B[k, n]\n", "\n"), "t.lt:10:"},
        {replace(good, "B[k, n]\n", "Q[k, n]\n"), "unknown tensor or function 'Q'"},
        {replace(good, "cursor 0", "cursor 7"), "cursor 7 is not a loop index"},
        {replace(good, "cursor 0", "cursor -1"), "cursor -1"},
        {replace(good, "cursor 0", "cursor 0\nname x"), "t.lt:20: text after the cursor line"},
        {replace(good, "loop k 4 0", "loop k 3 0"), "cover 3 elements but its extent is 4"},
        {replace(good, "loop k 4 0", "loop k 4 x"), "t.lt:14: 'x' is not an integer"},
        {replace(good, "loop k 4 0", "loop k 4 0 fast"), "t.lt:14: unknown loop annotation 'fast'"},
        {replace(good, "loop k 4 0", "loop k 99999999999999 0"), "t.lt"},
        // Coverage 16 * 2^60 + 4 wraps around int64 to 4: must not pass as a valid tree.
        {replace(good, "loop k 4 0",
                 "loop k 16 4\nloop k 1048576 0\nloop k 1048576 0\nloop k 1048576 0"),
         "t.lt"},
        {replace(good, "var m 4", "var m 0"), "extent 0"},
        {replace(good, "var m 4", "var m -4"), "extent -4"},
        {replace(good, "var m 4", "var m 4\nvar m 4"), "variable m declared twice"},
        {replace(good, "tensor A input 4 4", "tensor A input 4 4 4"), "indexed with 2"},
        {replace(good, "tensor A input 4 4", "tensor A matrix 4 4"),
         "unknown tensor kind 'matrix'"},
        {replace(good, "name mm4_4_4", "frobnicate 3"), "t.lt:2: unknown keyword 'frobnicate'"},
        {replace(good, "name mm4_4_4\n", ""), "t.lt: no 'name' line"},
        {replace(good, "name mm4_4_4", "name mm4_4_4\nname other"), "t.lt:3: a second 'name' line"},
        {replace(good, "loop k 4 0\n", ""),
         "nest 0: its loops do not iterate exactly over the variables of statement 0 (no loop "
         "over k)"},
        {replace(good, "nest 1\nloop m 4 0", "nest 1\nloop m 4 0\nloop k 4 0"),
         "statement 1 (loops over k, which it does not use)"},
        {replace(good, "nest 1\n", ""), "t.lt: nest 0"},
        {replace(good, "nest 1\n", "nest 1\nnest 0\n"), "t.lt"},
        {replace(good, "nest 0\n", "nest 4294967296\n"), "t.lt"},
        {replace(good, "cursor 0", "cursor 4294967296"), "t.lt"},
        {replace(good, "stmt C[m, n] = T[m, n]", "stmt A[m, n] = T[m, n]"),
         "writes input tensor A"},
    };
    for (const auto &c : cases) {
        std::string m = parse_error(c.text);
        EXPECT_NE(m.find(c.want), std::string::npos) << "want '" << c.want << "' in: " << m;
        EXPECT_NE(m, "<no error>");
    }
}

// Every pass over an expression recurses; 20,000 nested parentheses or `neg(` calls crashed
// read and validate with SIGSEGV. Past kMaxExprDepth levels it is an error naming the line.
TEST(Parse, DeeplyNestedExpressionsAreAnErrorNotAStackOverflow) {
    const std::string good = serialize(matmul_program(4, 4, 4));
    auto stmt = [](int depth, const std::string &open, const std::string &close) {
        std::string e;
        for (int i = 0; i < depth; ++i) e += open;
        e += "A[m, k]";
        for (int i = 0; i < depth; ++i) e += close;
        return e;
    };
    auto chain = [](int terms, const std::string &op) {
        std::string e = "A[m, k]";
        for (int i = 1; i < terms; ++i) e += op + "A[m, k]";
        return e;
    };
    for (const std::string &deep :
         {stmt(20000, "(", ")"), stmt(20000, "neg(", ")"), stmt(300, "max(0, ", ")"),
          chain(20000, " + "), chain(20000, " * ")}) {
        std::string m = parse_error(replace(good, "A[m, k] * B[k, n]", deep + " * B[k, n]"));
        EXPECT_NE(m.find("t.lt:10:"), std::string::npos) << m.substr(0, 200);
        EXPECT_NE(m.find("deeper than 256 levels"), std::string::npos) << m.substr(0, 200);
    }
    // Up to the limit it parses, and computes what the flat statement computes.
    // 254 neg, the read and the multiply by B: exactly 256 levels.
    for (const std::string &ok : {stmt(100, "(", ")"), stmt(127, "neg(neg(", "))"),
                                  "(" + chain(200, " * 1 + 0 * ") + ")"}) {
        Program p = parse_program(replace(good, "A[m, k] * B[k, n]", ok + " * B[k, n]"));
        Comparison c = verify_schedule(p);
        EXPECT_TRUE(c.ok) << c.first_mismatch;
        Buffers flat = make_buffers(*p.comp, 3);
        run_reference(*matmul_program(4, 4, 4).comp, flat);
        const Reference want = compute_reference(*p.comp, make_buffers(*p.comp, 3));
        EXPECT_TRUE(compare_outputs(*p.comp, want, flat).ok);
    }
}

TEST(Files, LoadBothFormatsAndRejectOthers) {
    tests::TempDir dir("text_format");
    Program p = apply(matmul_program(8, 8, 8), Action::Split2);
    write_file_atomically(dir / "ours.lt", serialize(p));
    EXPECT_TRUE(load_program_file(dir / "ours.lt").same_as(p));
    write_file_atomically(dir / "junk", "hello\n");
    auto message = [](const std::string &path) {
        try {
            load_program_file(path);
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string("<no error>");
    };
    EXPECT_NE(message(dir / "junk").find("not a benchmark file"), std::string::npos);
    EXPECT_NE(message(dir / "missing").find("cannot open"), std::string::npos);
    EXPECT_NE(message(dir.path.string()).find("is a directory"), std::string::npos);
    // Atomic writes leave exactly the target file behind.
    int files = 0;
    for (const auto &e : std::filesystem::directory_iterator(dir.path)) {
        ++files;
        EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
    }
    EXPECT_EQ(files, 2);
    EXPECT_THROW(write_file_atomically(dir / "no/such/dir/file", "x"), Error);
    EXPECT_EQ(read_file(dir / "junk"), "hello\n");
}
