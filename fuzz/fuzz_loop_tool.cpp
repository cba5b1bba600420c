// Fuzzes the loop_tool importer (LoopTune's benchmark files). Bad input must be a
// looptool::Error; what imports must serialize and parse back to the same program.
#include <cstddef>
#include <cstdint>
#include <string>

#include "looptool/formats/loop_tool_import.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view text(reinterpret_cast<const char *>(data), size);
    looptool::Program p;
    try {
        p = looptool::import_loop_tool(text, "fuzz/mm");
    } catch (const looptool::Error &) {
        return 0;
    }
    const std::string s = looptool::serialize(p);
    if (!looptool::parse_program(s, "round-trip.lt").same_as(p)) __builtin_trap();
    return 0;
}
