// Fuzzes the actions CSV reader. Bad input must be a looptool::Error; what parses must name
// the same actions when written back as a plain list.
#include <cstddef>
#include <cstdint>
#include <string>

#include "looptool/actions/actions.h"
#include "looptool/ir/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string_view text(reinterpret_cast<const char *>(data), size);
    std::vector<looptool::Action> actions;
    try {
        actions = looptool::parse_action_csv(text, "fuzz.csv");
    } catch (const looptool::Error &) {
        return 0;
    }
    std::string list;
    for (looptool::Action a : actions) list += std::string(looptool::action_name(a)) + ",";
    if (looptool::parse_action_list(list) != actions) __builtin_trap();
    return 0;
}
