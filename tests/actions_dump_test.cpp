// Each action as an example: the loop tree before and after it, as `dump` prints it, on a small
// matmul (m 8, n 32, k 16); every tree on the way matches the reference.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "looptool/actions/actions.h"
#include "looptool/check/verify.h"
#include "looptool/formats/text_format.h"
#include "test_util.h"

using namespace looptool;

namespace {

struct Step {
    Action action;
    const char *after;  // dump(p) once the action is applied
};

}  // namespace

TEST(ActionsByExample, EachActionChangesTheTreeAsItsDumpShows) {
    Program p = tests::matmul_program(8, 32, 16);
    EXPECT_EQ(dump(p), R"(for m in 8 : L0 <<<<<< cursor
 for k in 16 : L1
  for n in 32 : L2
   T[m, n] += A[m, k] * B[k, n]
for m in 8 : L3
 for n in 32 : L4
  C[m, n] = T[m, n]
)");
    const std::vector<Step> steps = {
        {Action::Down, R"(for m in 8 : L0
 for k in 16 : L1 <<<<<< cursor
  for n in 32 : L2
   T[m, n] += A[m, k] * B[k, n]
for m in 8 : L3
 for n in 32 : L4
  C[m, n] = T[m, n]
)"},
        {Action::Split4, R"(for m in 8 : L0
 for k in 4 : L1 <<<<<< cursor
  for k' in 4 : L2
   for n in 32 : L3
    T[m, n] += A[m, k] * B[k, n]
for m in 8 : L4
 for n in 32 : L5
  C[m, n] = T[m, n]
)"},
        {Action::SwapUp, R"(for k in 4 : L0 <<<<<< cursor
 for m in 8 : L1
  for k' in 4 : L2
   for n in 32 : L3
    T[m, n] += A[m, k] * B[k, n]
for m in 8 : L4
 for n in 32 : L5
  C[m, n] = T[m, n]
)"},
        {Action::SwapDown, R"(for m in 8 : L0
 for k in 4 : L1 <<<<<< cursor
  for k' in 4 : L2
   for n in 32 : L3
    T[m, n] += A[m, k] * B[k, n]
for m in 8 : L4
 for n in 32 : L5
  C[m, n] = T[m, n]
)"},
        {Action::Down, nullptr},
        {Action::Down, nullptr},
        {Action::Split8, R"(for m in 8 : L0
 for k in 4 : L1
  for k' in 4 : L2
   for n in 4 : L3 <<<<<< cursor
    for n' in 8 : L4
     T[m, n] += A[m, k] * B[k, n]
for m in 8 : L5
 for n in 32 : L6
  C[m, n] = T[m, n]
)"},
        {Action::Down, nullptr},
        {Action::Vectorize, R"(for m in 8 : L0
 for k in 4 : L1
  for k' in 4 : L2
   for n in 4 : L3
    for n' in 8 : L4 [vectorize] <<<<<< cursor
     T[m, n] += A[m, k] * B[k, n]
for m in 8 : L5
 for n in 32 : L6
  C[m, n] = T[m, n]
)"},
        {Action::Up, nullptr},
        {Action::Unroll, R"(for m in 8 : L0
 for k in 4 : L1
  for k' in 4 : L2
   for n in 4 : L3 [unroll] <<<<<< cursor
    for n' in 8 : L4 [vectorize]
     T[m, n] += A[m, k] * B[k, n]
for m in 8 : L5
 for n in 32 : L6
  C[m, n] = T[m, n]
)"},
        {Action::Up, nullptr},
        {Action::Merge, R"(for m in 8 : L0
 for k in 16 : L1 <<<<<< cursor
  for n in 4 : L2 [unroll]
   for n' in 8 : L3 [vectorize]
    T[m, n] += A[m, k] * B[k, n]
for m in 8 : L4
 for n in 32 : L5
  C[m, n] = T[m, n]
)"},
    };
    for (const Step &s : steps) {
        const std::string before = dump(p);
        p = apply(p, s.action);
        SCOPED_TRACE(std::string(action_name(s.action)) + " on\n" + before);
        if (s.after) EXPECT_EQ(dump(p), s.after);
        EXPECT_TRUE(verify_schedule(p).ok);
    }
}

// `parallel` (the `threads` preset): the mark on the outermost loop, kept by a split's outer
// part; each tree matches the reference, and its kernel on 2 threads too.
TEST(ActionsByExample, ParallelMarksTheOutermostLoopAndASplitKeepsItOutside) {
    Program p = tests::matmul_program(8, 32, 16);
    const std::vector<Step> steps = {
        {Action::Parallel, R"(for m in 8 : L0 [parallel] <<<<<< cursor
 for k in 16 : L1
  for n in 32 : L2
   T[m, n] += A[m, k] * B[k, n]
for m in 8 : L3
 for n in 32 : L4
  C[m, n] = T[m, n]
)"},
        {Action::Split2, R"(for m in 4 : L0 [parallel] <<<<<< cursor
 for m' in 2 : L1
  for k in 16 : L2
   for n in 32 : L3
    T[m, n] += A[m, k] * B[k, n]
for m in 8 : L4
 for n in 32 : L5
  C[m, n] = T[m, n]
)"},
    };
    JitOptions o;
    o.threads = 2;
    auto jit = Jit::create(o);
    for (const Step &s : steps) {
        const std::string before = dump(p);
        p = apply(p, s.action);
        SCOPED_TRACE(std::string(action_name(s.action)) + " on\n" + before);
        EXPECT_EQ(dump(p), s.after);
        EXPECT_TRUE(verify_schedule(p).ok);
        EXPECT_TRUE(tests::matches_reference(*jit, p));
    }
}
