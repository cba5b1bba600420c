// Temporary files (looptool/formats/temp_file.h) and the atomic write over them: new files at
// random names, never a file or symlink that was there before.
#include "looptool/formats/temp_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "looptool/formats/text_format.h"
#include "looptool/ir/error.h"
#include "test_util.h"

using namespace looptool;
namespace fs = std::filesystem;

namespace {

// The peak cache and the dataset files are written this way: a symlink planted at the name the
// writer used to pick (PATH.tmp.PID) was followed, and its target truncated and overwritten.
TEST(TempFile, AnAtomicWriteDoesNotFollowAPlantedSymlink) {
    tests::TempDir dir("tmp_link");
    tests::write(dir, "victim", "keep me");
    const fs::path target = dir.path / "peak.json";
    fs::create_symlink(dir.path / "victim", target.string() + ".tmp." + std::to_string(::getpid()));
    write_file_atomically(target.string(), "{}\n");
    EXPECT_EQ(tests::slurp(dir.path / "victim"), "keep me");
    EXPECT_EQ(tests::slurp(target), "{}\n");
    EXPECT_FALSE(fs::is_symlink(target));
}

TEST(TempFile, EachTemporaryIsANewFileBesideThePath) {
    tests::TempDir dir("tmp_new");
    const std::string path = dir / "out.txt";
    std::set<std::string> names;
    for (int i = 0; i < 20; ++i) {
        const std::string tmp = write_temp_file(path, "x" + std::to_string(i));
        EXPECT_EQ(tmp.rfind(path + ".tmp.", 0), 0u) << tmp;
        EXPECT_EQ(tests::slurp(tmp), "x" + std::to_string(i));
        names.insert(tmp);
    }
    EXPECT_EQ(names.size(), 20u);
    EXPECT_FALSE(fs::exists(path));
    try {
        write_temp_file(dir / "no/such/dir/out.txt", "x");
        ADD_FAILURE() << "wrote into a missing directory";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("out.txt: cannot create a temporary file"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
