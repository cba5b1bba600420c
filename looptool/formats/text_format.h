// Text forms of a Program:
//  - dump():      the readable loop tree in loop_tool's style, with the cursor marked;
//  - serialize(): our exact, round-tripping serialization (computation, schedule, cursor);
//  - parse_program(): its inverse. Format: docs/formats.md.
#pragma once

#include <string>
#include <string_view>

#include "looptool/ir/loop_tree.h"

namespace looptool {

/// for m in 28 : L0
///  for m' in 4 r 2 : L1 [unroll] <<<<<< cursor
///   T[m, n] += A[m, k] * B[k, n]
std::string dump(const Program &p, bool show_cursor = true);

std::string serialize(const Program &p);

/// Deepest statement expression parse_program() accepts (parentheses, calls and operator
/// chains all count). Every pass over an expression recurses, so without a bound a 40 KB file
/// of nested `neg(` overflowed the stack; real statements are a few levels deep.
inline constexpr int kMaxExprDepth = 256;

/// Parses serialize()'s output. Throws Error naming `source` and the line on any problem.
Program parse_program(std::string_view text, const std::string &source = "<text>");

/// Reads a benchmark file in either format: ours (first line `looptool-program`) or
/// loop_tool's serialized IR (LoopTune's benchmark files). Throws Error naming the file.
Program load_program_file(const std::string &path);

/// Writes via a temporary file and rename, so a failure never leaves a half-written file.
void write_file_atomically(const std::string &path, std::string_view content);

std::string read_file(const std::string &path);

}  // namespace looptool
