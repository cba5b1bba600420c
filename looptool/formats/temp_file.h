// Temporary files for writes that must never leave half a file: the content goes to a new file
// beside the final path, renamed into place once complete. The temporary is created with
// O_CREAT | O_EXCL | O_NOFOLLOW under a random name, so a file or symlink planted at a name an
// attacker can predict is never opened, truncated or followed.
#pragma once

#include <string>
#include <string_view>

namespace looptool {

/// Writes `content` to a new file `PATH.tmp.XXXXXXXX` (random hex; dataset listings skip
/// `.tmp.` names) in path's directory and returns its name. Throws Error naming `path` when it
/// cannot be created or written (the temporary is then removed).
std::string write_temp_file(const std::string &path, std::string_view content);

}  // namespace looptool
