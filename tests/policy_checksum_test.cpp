// Policy files carry a checksum of their network: the shipped policy loads without a warning,
// a copy with one flipped byte in its weights is refused with one line naming the file, through
// the API and through the binary; a damaged archive never leaks LibTorch's backtrace.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "test_util.h"
#include "tune/policy.h"

using namespace looptune;
using looptool::tests::TempDir;
namespace fs = std::filesystem;

namespace {

uint32_t le32(const std::string &s, size_t at) {
    uint32_t v = 0;
    std::memcpy(&v, s.data() + at, 4);
    return v;
}
uint16_t le16(const std::string &s, size_t at) {
    uint16_t v = 0;
    std::memcpy(&v, s.data() + at, 2);
    return v;
}

// The offset of the middle of the largest tensor record (`.../data/N`) of a policy file, a
// zip archive whose records are stored uncompressed. Sizes come from the central directory
// (the local headers may leave them to a trailing data descriptor).
size_t middle_of_largest_tensor(const std::string &zip) {
    size_t best_at = 0, best_size = 0;
    for (size_t at = zip.find("PK\x01\x02"); at != std::string::npos && at + 46 < zip.size();
         at = zip.find("PK\x01\x02", at + 4)) {
        const uint32_t size = le32(zip, at + 24);
        const uint16_t name_len = le16(zip, at + 28);
        const uint32_t local = le32(zip, at + 42);
        const std::string name = zip.substr(at + 46, name_len);
        if (name.find("/data/") == std::string::npos || size <= best_size) continue;
        if (local + 30 > zip.size()) continue;
        const size_t data = local + 30 + le16(zip, local + 26) + le16(zip, local + 28);
        best_size = size;
        best_at = data + size / 2;
    }
    return best_at;
}

}  // namespace

TEST(PolicyChecksum, TheShippedPolicyLoadsWithoutAWarning) {
    testing::internal::CaptureStderr();
    Policy p = Policy::load(default_policy_path());
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_NE(p.info().meta_json.find("network"), std::string::npos);
}

TEST(PolicyChecksum, AFlippedByteInTheWeightsIsAClearError) {
    TempDir dir("policy_flip");
    std::string bytes = looptool::tests::slurp(default_policy_path());
    const size_t at = middle_of_largest_tensor(bytes);
    ASSERT_GT(at, 0u);
    bytes[at] = char(bytes[at] ^ 0x10);  // one bit of one float
    looptool::tests::write(dir, "flipped.pt", bytes);
    try {
        Policy::load(dir / "flipped.pt");
        FAIL() << "a damaged policy loaded";
    } catch (const looptool::Error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("flipped.pt: damaged policy file: checksum"), std::string::npos)
            << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --bench ds/mm8_8_8 --policy flipped.pt");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: flipped.pt: damaged policy file: checksum", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(PolicyChecksum, ATruncatedPolicyIsOneLineWithoutLibTorchsBacktrace) {
    TempDir dir("policy_cut");
    const std::string bytes = looptool::tests::slurp(default_policy_path());
    looptool::tests::write(dir, "cut.pt", bytes.substr(0, bytes.size() / 2));
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --bench ds/mm8_8_8 --policy cut.pt");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: cut.pt: not a looptune policy file", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.find("frame #"), std::string::npos) << r.err;
}
