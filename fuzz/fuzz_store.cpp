// Fuzzes the measurement store reader with whole database files: the bytes become a file,
// which is opened as an existing store, summarised (stats) and checked. A damaged or foreign
// file must be a looptool::Error or a list of problems from check(), never a crash or a hang.
// The file lives in /dev/shm when there is one: the store fsyncs, and a disk made it ~10x slower.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "env/store/measurement_store.h"
#include "looptool/ir/error.h"

namespace {
std::string scratch_path() {
    std::filesystem::path dir =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    return (dir / ("looptune_fuzz_store_" + std::to_string(::getpid()) + ".db")).string();
}

void remove_store(const std::string &path) {
    for (const char *suffix : {"", "-wal", "-shm", "-journal"})
        std::filesystem::remove(path + suffix);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const std::string path = scratch_path();
    remove_store(path);
    {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char *>(data), std::streamsize(size));
    }
    try {
        auto store = looptune::MeasurementStore::open(path, /*create=*/false);
        (void)store->stats();
        (void)store->check();
    } catch (const looptool::Error &) {}
    remove_store(path);
    return 0;
}
