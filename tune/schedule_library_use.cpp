#include "tune/schedule_library_use.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "env/store/measurement_store.h"
#include "looptool/actions/actions.h"
#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "looptool/measure/measure.h"

namespace looptune {

std::string library_machine(int threads) {
    std::string m = machine_fingerprint(looptool::machine_peak_gflops());
    if (threads > 1) m += fmt::format("|threads={}", threads);
    return m;
}

std::optional<LibraryAnswer> library_answer(ScheduleLibrary &lib, const std::string &machine,
                                            const looptool::Program &start) {
    auto e = lib.find(machine, computation_key(*start.comp));
    if (!e) return std::nullopt;
    try {
        looptool::Program stored = looptool::parse_program(e->program, lib.path());
        if (computation_key(*stored.comp) != e->computation) return std::nullopt;
        // The caller's computation (its name) with the stored loops.
        looptool::Program p{start.comp, stored.tree, stored.cursor};
        looptool::validate_loop_tree(*p.comp, p.tree);
        return LibraryAnswer{std::move(*e), std::move(p)};
    } catch (const looptool::Error &) {
        return std::nullopt;
    }
}

LibraryEntry library_entry(const std::string &machine, const looptool::Program &start,
                           const GuidedResult &r, bool verified, const std::string &version) {
    LibraryEntry e;
    e.machine = machine;
    e.computation = computation_key(*start.comp);
    e.name = start.comp->name;
    describe_shape(*start.comp, e);
    e.program = looptool::serialize(r.best);
    e.actions = looptool::action_names(r.actions);
    e.gflops = r.best_gflops;
    e.start_gflops = r.base_gflops;
    e.verified = verified;
    e.version = version;
    return e;
}

Filed file_result(ScheduleLibrary &lib, const LibraryEntry &e) {
    if (!e.verified) return Filed::NotVerified;
    const auto old = lib.find(e.machine, e.computation);
    if (old && old->verified && old->gflops > e.gflops) return Filed::KeptFaster;
    lib.put(e);
    return old ? Filed::Replaced : Filed::Added;
}

std::unique_ptr<ScheduleLibrary> open_tune_library(const std::string &option,
                                                   const std::string &store, std::string *warning) {
    const std::string path = option.empty() ? ScheduleLibrary::default_path(store) : option;
    if (path.empty() || path == "off") return nullptr;
    // The cache folder may not exist yet; any other problem is open()'s to name.
    std::error_code ec;
    if (const auto dir = std::filesystem::path(path).parent_path(); !dir.empty())
        std::filesystem::create_directories(dir, ec);
    const bool named = !option.empty() || !store.empty() || std::getenv("LOOPTUNE_LIBRARY");
    try {
        return ScheduleLibrary::open(path);
    } catch (const looptool::Error &e) {
        if (named) throw;
        if (warning) *warning = fmt::format("no schedule library: {}", e.what());
        return nullptr;
    }
}

std::string verify_and_file(ScheduleLibrary &lib, const std::string &machine, Environment &env,
                            const looptool::Program &start, const GuidedResult &r,
                            const std::string &version) {
    const looptool::Comparison c = env.verify(r.best);
    switch (file_result(lib, library_entry(machine, start, r, c.ok, version))) {
        case Filed::Added: return "added";
        case Filed::Replaced: return "replaced";
        case Filed::KeptFaster: return "kept the library's faster schedule";
        case Filed::NotVerified:
            return fmt::format("not filed: the chosen kernel failed verification ({})",
                               c.failures(1));
    }
    return "";
}

}  // namespace looptune
