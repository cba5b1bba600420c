// The reference and scheduled interpreters: hand-checked values, the comparison, and the
// property that every random legal action sequence computes the reference result.
#include "looptool/check/verify.h"

#include <gtest/gtest.h>

#include <cmath>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptool;
using looptool::tests::matmul_program;

namespace {

// Executes a nest literally from its (size, tail) fields, independently of run_schedule: a loop
// runs `size` full chunks of its inner coverage, then (tail > 0) one chunk of `tail` elements in
// which the inner loops of the var cover only `tail`. Counts the visits of every index point.
struct VisitCounter {
    const Computation &c;
    const Nest &nest;
    std::vector<int64_t> idx, avail;  // per var; avail < 0 means "full chunk"
    std::vector<int> visits;          // per point of the domain of all vars, row-major
    int64_t out_of_range = 0;

    void run(size_t d) {
        if (d == nest.loops.size()) {
            int64_t flat = 0;
            for (size_t v = 0; v < idx.size(); ++v) {
                if (idx[v] >= c.vars[v].extent) {
                    ++out_of_range;
                    return;
                }
                flat = flat * c.vars[v].extent + idx[v];
            }
            if (visits.empty()) {
                int64_t total = 1;
                for (const auto &var : c.vars) total *= var.extent;
                visits.assign(size_t(total), 0);
            }
            visits[size_t(flat)]++;
            return;
        }
        const Loop &l = nest.loops[d];
        const size_t v = size_t(l.var);
        const int64_t inner = inner_coverage(nest, int(d)), base = idx[v], saved = avail[v];
        if (saved < 0) {  // full: exactly size chunks, then the tail
            for (int64_t i = 0; i < l.size; ++i) {
                idx[v] = base + i * inner;
                avail[v] = -1;
                run(d + 1);
            }
            if (l.tail > 0) {
                idx[v] = base + l.size * inner;
                avail[v] = l.tail;
                run(d + 1);
            }
        } else {  // partial: cover `saved` elements in chunks of inner
            for (int64_t s = 0; s < saved; s += inner) {
                idx[v] = base + s;
                avail[v] = std::min(inner, saved - s) == inner ? -1 : saved - s;
                run(d + 1);
            }
        }
        idx[v] = base;
        avail[v] = saved;
    }
};

// Every point of each statement's domain is visited exactly once, as the sizes and tails say.
void expect_each_point_once(const Program &p) {
    const Computation &c = *p.comp;
    for (const Nest &nest : p.tree.nests) {
        VisitCounter vc{c,
                        nest,
                        std::vector<int64_t>(c.vars.size(), 0),
                        std::vector<int64_t>(c.vars.size(), -1),
                        {},
                        0};
        vc.run(0);
        int64_t want = 1;
        std::vector<bool> used(c.vars.size(), false);
        for (const Loop &l : nest.loops) used[size_t(l.var)] = true;
        for (size_t v = 0; v < used.size(); ++v)
            if (used[v]) want *= c.vars[v].extent;
        EXPECT_EQ(vc.out_of_range, 0) << dump(p);
        int64_t visited = 0;
        for (int n : vc.visits) {
            if (n > 1) {
                ADD_FAILURE() << "a point is visited " << n << " times in\n" << dump(p);
                break;
            }
            visited += n;
        }
        EXPECT_EQ(visited, want) << dump(p);
    }
}

}  // namespace

TEST(Interpreter, HandCheckedMatmul) {
    Program p = matmul_program(2, 2, 2);
    Buffers b = make_buffers(*p.comp, 1);
    b.data[0] = {1, 2, 3, 4};  // A
    b.data[1] = {5, 6, 7, 8};  // B
    Buffers s = b;
    run_reference(*p.comp, b);
    EXPECT_EQ(b.data[3], (TensorData{19, 22, 43, 50}));
    run_schedule(apply(p, Action::SwapDown), s);
    EXPECT_EQ(s.data[3], (TensorData{19, 22, 43, 50}));
}

TEST(Interpreter, ConvReferenceMatchesDirectLoops) {
    const int64_t N = 2, C = 3, H = 6, W = 5, CO = 4, KH = 3, KW = 2, HO = H - KH + 1,
                  WO = W - KW + 1;
    Computation c = make_conv2d(N, C, H, W, CO, KH, KW);
    Buffers b = make_buffers(c, 5);
    run_reference(c, b);
    const auto &x = b.data[0], &w = b.data[1], &y = b.data[3];
    double max_err = 0;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < CO; ++m)
            for (int64_t ho = 0; ho < HO; ++ho)
                for (int64_t wo = 0; wo < WO; ++wo) {
                    double acc = 0;
                    for (int64_t ci = 0; ci < C; ++ci)
                        for (int64_t kh = 0; kh < KH; ++kh)
                            for (int64_t kw = 0; kw < KW; ++kw)
                                acc +=
                                    double(x[size_t(((n * C + ci) * H + ho + kh) * W + wo + kw)]) *
                                    double(w[size_t(((m * C + ci) * KH + kh) * KW + kw)]);
                    max_err = std::max(
                        max_err, std::abs(acc - y[size_t(((n * CO + m) * HO + ho) * WO + wo)]));
                }
    EXPECT_LT(max_err, 1e-5);
    EXPECT_GT(std::abs(y[0]), 0.0f);  // not trivially zero
}

TEST(Interpreter, BuffersAreSeededAlignedAndZeroedOutputs) {
    Computation c = make_matmul(5, 7, 3);
    Buffers a = make_buffers(c, 9), b = make_buffers(c, 9), d = make_buffers(c, 10);
    EXPECT_EQ(a.data, b.data);
    EXPECT_NE(a.data[0], d.data[0]);
    for (float v : a.data[0]) {
        EXPECT_GE(v, -1.0f);
        EXPECT_LT(v, 1.0f);
    }
    for (float v : a.data[3]) EXPECT_EQ(v, 0.0f);
    for (float *ptr : a.pointers()) EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 64, 0u);
    EXPECT_EQ(a.data[0].size(), 15u);
}

TEST(Interpreter, CompareOutputsFindsMismatchesAndNaN) {
    Computation c = make_matmul(4, 4, 4);
    Buffers b = make_buffers(c, 1);
    const Reference want = compute_reference(c, b);
    Buffers got = b;
    run_reference(c, got);
    EXPECT_TRUE(compare_outputs(c, want, got).ok);
    got.data[3][5] += 0.5f;
    Comparison r = compare_outputs(c, want, got);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.first_mismatch.find("C[1,1]"), std::string::npos) << r.first_mismatch;
    EXPECT_GT(r.max_error_ratio, 1);
    run_reference(c, got);
    got.data[3][0] = NAN;
    EXPECT_FALSE(compare_outputs(c, want, got).ok);
    // Only outputs count: the temporary may differ.
    run_reference(c, got);
    got.data[2][0] += 100;
    EXPECT_TRUE(compare_outputs(c, want, got).ok);
}

TEST(Interpreter, AWrongNestOrderIsCaught) {
    Program p = matmul_program(8, 8, 8);
    std::swap(p.tree.nests[0], p.tree.nests[1]);  // write C before computing T
    Comparison r = verify_schedule(p);
    EXPECT_FALSE(r.ok);
}

TEST(Interpreter, VisitCounterCatchesAMissingTail) {
    Program p = apply(matmul_program(37, 4, 4), Action::Split4);  // m (9 r 1), m' 4
    expect_each_point_once(p);
    Program bad = p;
    bad.tree.nests[0].loops[0].tail = 0;  // drops m = 36
    EXPECT_THROW(validate_loop_tree(*bad.comp, bad.tree), Error);
    const Nest &nest = bad.tree.nests[0];
    VisitCounter vc{*bad.comp, nest, std::vector<int64_t>(3, 0), std::vector<int64_t>(3, -1),
                    {},        0};
    vc.run(0);
    int64_t visited = 0;
    for (int n : vc.visits) visited += n;
    EXPECT_EQ(visited, 36 * 4 * 4);
}

// The property: random legal action sequences (full space, 1..20 actions) on awkward shapes
// always compute the reference result, keep a valid tree and visit every point once. Sharded so
// ctest -j2 runs it on both cores.
class ScheduleProperty : public ::testing::TestWithParam<int> {};

TEST_P(ScheduleProperty, RandomSequencesMatchTheReference) {
    constexpr int kPerShard = 160;
    std::mt19937_64 rng(1000 + uint64_t(GetParam()));
    for (int i = 0; i < kPerShard; ++i) {
        std::vector<Action> taken;
        Program p = tests::random_walk(tests::random_matmul(rng, 64000), rng, 20,
                                       ActionSpace::preset("full"), &taken);
        ASSERT_NO_THROW(validate_loop_tree(*p.comp, p.tree));
        expect_each_point_once(p);
        Comparison c = verify_schedule(p, uint64_t(i));
        if (!c.ok) {
            std::string seq;
            for (Action a : taken) seq += std::string(action_name(a)) + ",";
            FAIL() << p.comp->name << " after " << seq << ": " << c.first_mismatch << "\n"
                   << dump(p);
        }
        EXPECT_EQ(c.checked, c.total);  // small: the full reference
    }
}

INSTANTIATE_TEST_SUITE_P(Shards, ScheduleProperty, ::testing::Range(0, 8));

TEST(ScheduleProperty, ConvAndElementwiseSequencesMatchTheReference) {
    std::mt19937_64 rng(77);
    auto conv = std::make_shared<Computation>(make_conv2d(1, 3, 7, 6, 5, 3, 2));
    auto add = std::make_shared<Computation>(make_elementwise_add(37, 17));
    for (int i = 0; i < 60; ++i)
        for (const auto &c : {conv, add}) {
            Program p = tests::random_walk(Program::naive(c), rng, 20);
            expect_each_point_once(p);
            Comparison r = verify_schedule(p, uint64_t(i));
            EXPECT_TRUE(r.ok) << r.first_mismatch << "\n" << dump(p);
        }
}

// Tensors of 4 MB and more start on a 2 MB boundary (huge pages where the kernel grants them:
// first touch of a large GEMV matrix was most of tuning it); smaller ones on 64 bytes.
TEST(Interpreter, LargeBuffersAreAlignedForHugePages) {
    const Computation c = make_matmul(8, 2048, 1024);  // A 32 KB, B 8 MB, T and C 64 KB
    Buffers b = make_buffers(c, 1);
    const std::vector<float *> p = b.pointers();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p[1]) % (uintptr_t(2) << 20), 0u);
    for (float *q : p) EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
    // Copies (verification copies the buffers) keep both alignments.
    Buffers copy = b;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.pointers()[1]) % (uintptr_t(2) << 20), 0u);
    EXPECT_EQ(copy.data[1], b.data[1]);
}
