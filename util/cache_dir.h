// Where looptune keeps what it learns about a machine (peak, schedule library, adapted policies,
// cost models): one rule for every layer, so the files of one machine sit together.
#pragma once

#include <cctype>
#include <cstdlib>
#include <string>

namespace looptune {

/// $XDG_CACHE_HOME/looptune, else $HOME/.cache/looptune; "" when neither is set (callers then
/// keep nothing, or say where they could not).
inline std::string looptune_cache_dir() {
    if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
        return std::string(xdg) + "/looptune";
    if (const char *home = std::getenv("HOME"); home && *home)
        return std::string(home) + "/.cache/looptune";
    return "";
}

/// `name` (e.g. a machine fingerprint, "AMD EPYC|peak=118|code=4") as a file name: letters,
/// digits, '-' and '.' kept, anything else '_'.
inline std::string file_name_from(std::string name) {
    for (char &ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '_';
    return name;
}

}  // namespace looptune
