// How `tune` uses the schedule library (env/store/schedule_library.h): a computation tuned
// before on this machine is answered from it without a search, and each new result is filed
// there once the reference interpreter has checked it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "env/environment.h"
#include "env/store/schedule_library.h"
#include "tune/guided_search.h"

namespace looptune {

/// This machine's key in the library: the measurement store's fingerprint (the stored peak is
/// read, measured only when none is stored), and the threads when above 1: a parallel
/// schedule's figure is its threads'.
std::string library_machine(int threads = 1);

struct LibraryAnswer {
    LibraryEntry entry;
    looptool::Program program;  ///< the stored schedule over the caller's computation
};

/// The library's schedule for `start`'s computation on `machine`, or nullopt when it has none
/// or its program no longer reads as that computation (a kernel code change can do that).
std::optional<LibraryAnswer> library_answer(ScheduleLibrary &lib, const std::string &machine,
                                            const looptool::Program &start);

/// What tune files for `start` after a search; `verified`: the chosen kernel passed
/// Environment::verify() (file_result() never files one that did not).
LibraryEntry library_entry(const std::string &machine, const looptool::Program &start,
                           const GuidedResult &r, bool verified, const std::string &version);

enum class Filed { Added, Replaced, KeptFaster, NotVerified };
/// Files `e` unless the library holds a faster verified schedule for it, or `e` is unverified.
Filed file_result(ScheduleLibrary &lib, const LibraryEntry &e);

/// tune's library: the store at `option` when given, else ScheduleLibrary::default_path(store)
/// (its folder created when missing); null for "off" or no path. A library the user named that
/// cannot be opened throws looptool::Error; the default one (the user's cache) gives null and
/// says why in `*warning` instead: tuning goes on without it.
std::unique_ptr<ScheduleLibrary> open_tune_library(const std::string &option,
                                                   const std::string &store,
                                                   std::string *warning = nullptr);

/// Checks r's chosen kernel with env.verify(), files it (file_result()) and says what happened:
/// "added", "replaced", "kept the library's faster schedule", or why it was not filed.
std::string verify_and_file(ScheduleLibrary &lib, const std::string &machine, Environment &env,
                            const looptool::Program &start, const GuidedResult &r,
                            const std::string &version);

}  // namespace looptune
