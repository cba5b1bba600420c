// Fuzzes our program format (parse_program). Bad input must be a looptool::Error; anything
// else escaping (InternalError, a crash, a sanitizer report) is a bug. What parses must
// print, round-trip exactly, and survive every action's legality check and application.
#include <cstddef>
#include <cstdint>
#include <string>

#include "looptool/actions/actions.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view text(reinterpret_cast<const char *>(data), size);
    looptool::Program p;
    try {
        p = looptool::parse_program(text, "fuzz.lt");
    } catch (const looptool::Error &) {
        return 0;
    }
    const std::string s = looptool::serialize(p);
    if (looptool::serialize(looptool::parse_program(s, "round-trip.lt")) != s) __builtin_trap();
    (void)looptool::dump(p);
    for (looptool::Action a : looptool::all_actions()) {
        looptool::ApplyResult r = looptool::try_apply(p, a);
        if (r.applied) looptool::validate_loop_tree(*r.program.comp, r.program.tree);
    }
    return 0;
}
