// Importer for loop_tool's serialized IR, the format of LoopTune's benchmark files
// (`v:` variable lines, `n:` node lines, `i:` inputs, `o:` outputs; see
// ../shared/corpus/looptune/README.md). The node loop orders (var;size;tail) become our loop
// tree, so a file that was already scheduled imports with its schedule.
#pragma once

#include <string>
#include <string_view>

#include "looptool/ir/loop_tree.h"

namespace looptool {

/// `source` names the file in errors; the computation is named after its basename.
/// Throws Error for malformed text, and an Error containing "unsupported" for graphs that are
/// well formed but not a supported computation.
Program import_loop_tool(std::string_view text, const std::string &source);

}  // namespace looptool
