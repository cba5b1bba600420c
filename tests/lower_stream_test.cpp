// The lowering's streaming stores (lower_stream.h): which outputs stream, that their vector
// stores carry the non-temporal hint with a fence before the kernel returns, and that the
// kernels stay the reference's.
#include "looptool/lower/lower_stream.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>

#include "looptool/ir/row_ops.h"
#include "looptool/lower/lower.h"
#include "search/seeds.h"
#include "test_util.h"

using namespace looptool;

namespace {

Program rows_vectorized(Computation c) {
    Program p = Program::naive(std::make_shared<Computation>(std::move(c)));
    const auto acts = looptune::row_vector_actions(*p.comp, 64);
    EXPECT_TRUE(acts.has_value());
    for (Action a : acts.value_or(std::vector<Action>{})) p = apply(p, a);
    return p;
}

LowerOptions streaming_from(int64_t bytes) {
    LowerOptions o;
    o.stream_bytes = bytes;
    return o;
}

}  // namespace

TEST(LowerStream, RowOutputsStreamPastTheThresholdAndMatchTheReference) {
    JitOptions o;
    o.threads = 1;
    o.lower.stream_bytes = 1;
    auto jit = Jit::create(o);
    for (const Program &p :
         {rows_vectorized(make_softmax(37, 128)), rows_vectorized(make_layernorm(5, 200)),
          rows_vectorized(make_gelu(3, 80)), rows_vectorized(make_softmax(4, 48))}) {
        SCOPED_TRACE(p.comp->name);
        const LoweredIR ir = lower_to_llvm_ir(p, "k", streaming_from(1));
        EXPECT_GT(ir.summary.streamed_stores, 0) << ir.ir;
        EXPECT_NE(ir.ir.find("!nontemporal"), std::string::npos);
        EXPECT_NE(ir.ir.find("fence seq_cst"), std::string::npos);
        // Below the threshold, or with it off: plain stores and no fence.
        for (int64_t off : {int64_t(0), p.comp->tensors.back().num_elements() * 4 + 4}) {
            const LoweredIR plain = lower_to_llvm_ir(p, "k", streaming_from(off));
            EXPECT_EQ(plain.summary.streamed_stores, 0);
            EXPECT_EQ(plain.ir.find("!nontemporal"), std::string::npos);
        }
        EXPECT_TRUE(tests::matches_reference(*jit, p));
    }
}

// An output a reduction writes (a matmul's, its copy elided), a temporary, or an output written
// lane by lane (a naive nest's scalar stores) never streams.
TEST(LowerStream, ReducedReadOrScalarOutputsDoNotStream) {
    const Program mm = tests::matmul_program(64, 64, 64);
    EXPECT_EQ(lower_to_llvm_ir(mm, "k", streaming_from(1)).summary.streamed_stores, 0);
    const Program read_back = parse_program(R"(looptool-program 1
name readback
var i 4
var j 32
tensor X input 4 32
tensor Y temp 4 32
tensor Z output 4 32
stmt Y[i, j] = X[i, j] * X[i, j]
stmt Z[i, j] = Y[i, j] + X[i, j]
nest 0
loop i 4 0
loop j 32 0
nest 1
loop i 4 0
loop j 32 0
cursor 0
)",
                                            "readback");
    Program vec = read_back;
    for (Action a : parse_action_list("down, vectorize, down, down, vectorize"))
        vec = apply(vec, a);
    const LoweredIR ir = lower_to_llvm_ir(vec, "k", streaming_from(1));
    // Z's vector store streams; the temporary Y's does not.
    EXPECT_EQ(ir.summary.streamed_stores, 1) << ir.ir;
    const Program scalar = Program::naive(std::make_shared<Computation>(make_softmax(8, 64)));
    EXPECT_EQ(lower_to_llvm_ir(scalar, "k", streaming_from(1)).summary.streamed_stores, 0);
    auto jit = Jit::create();
    EXPECT_TRUE(tests::matches_reference(*jit, vec));
}

TEST(LowerStream, TheLastLevelCacheIsReadOnce) {
    const int64_t b = detail::last_level_cache_bytes();
    EXPECT_GE(b, int64_t(1) << 16);
    EXPECT_EQ(detail::last_level_cache_bytes(), b);
}
