// Policy files carry a checksum: the shipped policy loads without a warning, a copy with one
// flipped byte in its weights is refused with one line naming the file, through the API and
// through the binary; a truncated or malformed file is one line too. A policy whose checksum is
// right but whose tensors, header or episode length are not is refused on load. A LibTorch
// policy (the format before flat files) is refused by `tune` with the command that converts it,
// and that command converts it. Training checkpoints carry a checksum of their own.
#include <gtest/gtest.h>

#include <boost/crc.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "policy/policy_file.h"
#include "rl/learner.h"
#include "rl/policy_convert.h"
#include "rl/qnet.h"
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

// The offset of the middle of the largest tensor record (`.../data/N`) of a LibTorch archive,
// a zip archive whose records are stored uncompressed. Sizes come from the central directory
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

// The middle of a flat policy file's weights (after its "data N" line).
size_t middle_of_weights(const std::string &bytes) {
    const size_t data = bytes.find("\ndata ");
    const size_t start = bytes.find('\n', data + 1) + 1;
    return start + (bytes.size() - 15 - start) / 2;
}

// `body` (a policy file without its last line) closed with its right checksum line.
std::string with_checksum(const std::string &body) {
    boost::crc_32_type crc;
    crc.process_bytes(body.data(), body.size());
    return body + fmt::format("crc32 {:08x}\n", crc.checksum());
}

}  // namespace

TEST(PolicyChecksum, TheShippedPolicyLoadsWithoutAWarning) {
    testing::internal::CaptureStderr();
    Policy p = Policy::load(shipped_policy_path());
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_NE(p.info().meta_json.find("network"), std::string::npos);
}

TEST(PolicyChecksum, AFlippedByteInTheWeightsIsAClearError) {
    TempDir dir("policy_flip");
    std::string bytes = looptool::tests::slurp(shipped_policy_path());
    const size_t at = middle_of_weights(bytes);
    bytes[at] = char(bytes[at] ^ 0x10);  // one bit of one float
    looptool::tests::write(dir, "flipped.policy", bytes);
    try {
        Policy::load(dir / "flipped.policy");
        FAIL() << "a damaged policy loaded";
    } catch (const looptool::Error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("flipped.policy: damaged policy file: checksum"), std::string::npos)
            << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --bench ds/mm8_8_8 --policy flipped.policy");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: flipped.policy: damaged policy file: checksum", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(PolicyChecksum, ATruncatedPolicyIsOneLine) {
    TempDir dir("policy_cut");
    const std::string bytes = looptool::tests::slurp(shipped_policy_path());
    for (size_t keep : {bytes.size() / 2, bytes.size() - 1, size_t(10), size_t(0)}) {
        looptool::tests::write(dir, "cut.policy", bytes.substr(0, keep));
        try {
            Policy::load(dir / "cut.policy");
            ADD_FAILURE() << "a policy cut to " << keep << " bytes loaded";
        } catch (const looptool::Error &e) {
            EXPECT_EQ(
                std::string(e.what()).rfind(dir / "cut.policy: not a looptune policy file", 0), 0u)
                << e.what();
        }
    }
    looptool::tests::write(dir, "cut.policy", bytes.substr(0, bytes.size() / 2));
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --bench ds/mm8_8_8 --policy cut.policy");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: cut.policy: not a looptune policy file: truncated", 0), 0u)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Each malformed part of a file under a right checksum: only the reader's own checks stand
// between it and a tune.
TEST(PolicyChecksum, AMalformedFileUnderARightChecksumIsAClearError) {
    TempDir dir("policy_malformed");
    std::string bytes = looptool::tests::slurp(shipped_policy_path());
    bytes.resize(bytes.size() - 15);  // without its checksum line
    const auto replaced = [&](const std::string &from, const std::string &to) {
        std::string b = bytes;
        const size_t at = b.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        return b.replace(at, from.size(), to);
    };
    const size_t data = bytes.find("\ndata ") + 1;
    const std::string data_line = bytes.substr(data, bytes.find('\n', data) - data);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {replaced("looptune-policy 1", "looptune-policy 2"), "not 'looptune-policy 1'"},
        {replaced("\nmeta ", "\nmeta 9"), "the description does not end where"},
        {replaced("\nmeta ", "\nmeta 9999"), "truncated in the description"},
        {replaced("\ntensors ", "\ntensors 1"), ""},
        {replaced("mlp.0.bias 1 ", "mlp.0.bias 2 1 "), "tensor mlp.0.bias"},
        {replaced("mlp.0.bias 1 ", "mlp.0.bias 9 "), "tensor mlp.0.bias rank"},
        {replaced(data_line, "data 1"), "the data line does not announce"},
        {bytes + "x", "bytes after the weights"},
        {replaced("mlp.0.bias", "mlp.9.bias"), "no tensor mlp.0.bias"},
    };
    for (const auto &[body, expected] : cases) {
        looptool::tests::write(dir, "bad.policy", with_checksum(body));
        try {
            Policy::load(dir / "bad.policy");
            ADD_FAILURE() << "loaded; expected " << expected;
        } catch (const looptool::Error &e) {
            const std::string what = e.what();
            EXPECT_EQ(what.rfind(dir / "bad.policy: not a looptune policy file: ", 0), 0u) << what;
            EXPECT_NE(what.find(expected), std::string::npos) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        }
    }
}

namespace {

// The shipped policy rewritten with `edit` applied to its tensors and description; the
// checksum is recomputed, so only the loader's own checks stand between it and a tune.
void write_edited_policy(const fs::path &path, void (*edit_tensors)(PolicyFile &),
                         void (*edit_meta)(nlohmann::json &)) {
    PolicyFile file = read_policy_file(shipped_policy_path());
    nlohmann::json j = nlohmann::json::parse(file.meta_json);
    if (edit_tensors) edit_tensors(file);
    if (edit_meta) edit_meta(j);
    file.meta_json = j.dump();
    write_policy_file(path, file);
}

PolicyTensor &tensor(PolicyFile &file, const std::string &name) {
    for (PolicyTensor &t : file.tensors)
        if (t.name == name) return t;
    throw std::runtime_error("no tensor " + name);
}

}  // namespace

TEST(PolicyShapes, ATensorOfTheWrongShapeIsABadFileNotAnInternalError) {
    TempDir dir("policy_shape");
    write_edited_policy(
        dir / "bias.policy",
        [](PolicyFile &f) {
            tensor(f, "mlp.0.bias") = {"mlp.0.bias", {2}, {0.f, 0.f}};
        },
        nullptr);
    write_edited_policy(
        dir / "weight.policy",
        [](PolicyFile &f) {
            PolicyTensor &w = tensor(f, "mlp.2.weight");
            w.shape = {w.shape[0], 3};
            w.data.assign(size_t(w.shape[0] * 3), 0.f);
        },
        nullptr);
    for (const char *file : {"bias.policy", "weight.policy"}) {
        try {
            Policy::load(dir / file);
            ADD_FAILURE() << file << ": a policy with a wrongly shaped tensor loaded";
        } catch (const looptool::Error &e) {
            EXPECT_NE(std::string(e.what()).find("has shape ["), std::string::npos) << e.what();
        }
    }
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --greedy --bench ds/mm8_8_8 --policy bias.policy");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(
        r.err.rfind("error: bias.policy: not a looptune policy file: tensor mlp.0.bias has shape "
                    "[2], the network needs [",
                    0),
        0u)
        << r.err;
    r = looptool::tests::run_cli(dir,
                                 "export --tune --bench ds/mm8_8_8 --policy weight.policy --out x");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("tensor mlp.2.weight has shape"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.path / "x" / "mm8_8_8.o"));
}

TEST(PolicyShapes, AnAbsurdEpisodeLengthIsRefusedOnLoad) {
    TempDir dir("policy_steps");
    write_edited_policy(dir / "long.policy", nullptr,
                        [](nlohmann::json &j) { j["max_steps"] = 2000000000; });
    write_edited_policy(dir / "half.policy", nullptr,
                        [](nlohmann::json &j) { j["max_steps"] = 2.5; });
    for (const char *file : {"long.policy", "half.policy"}) {
        try {
            Policy::load(dir / file);
            ADD_FAILURE() << file << ": loaded";
        } catch (const looptool::Error &e) {
            EXPECT_NE(std::string(e.what()).find("max_steps"), std::string::npos) << e.what();
        }
    }
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --greedy --bench ds/mm8_8_8 --policy long.policy");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("max_steps 2000000000 is not an integer in [1, 1000]"), std::string::npos)
        << r.err;
}

// A policy in LibTorch's format: `tune` says how to convert it, `looptool policy convert` (in
// looptool-train) converts it, and the result is the same policy.
TEST(PolicyConvert, ALibTorchPolicyIsRefusedByTuneAndConverted) {
    TempDir dir("policy_convert");
    const PolicyFile shipped = read_policy_file(shipped_policy_path());
    QNet net = qnet_from_policy_file(shipped);
    save_policy_file(dir / "old.pt", net, shipped.meta_json);
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --greedy --bench ds/mm8_8_8 --policy old.pt");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: old.pt: a LibTorch policy file", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("`looptool policy convert old.pt OUT.policy`"), std::string::npos)
        << r.err;
    r = looptool::tests::run_cli(dir, "policy convert old.pt new.policy");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const PolicyFile converted = read_policy_file(dir / "new.policy");
    EXPECT_EQ(converted.meta_json, shipped.meta_json);
    ASSERT_EQ(converted.tensors.size(), shipped.tensors.size());
    for (size_t i = 0; i < shipped.tensors.size(); ++i) {
        EXPECT_EQ(converted.tensors[i].name, shipped.tensors[i].name);
        EXPECT_EQ(converted.tensors[i].shape, shipped.tensors[i].shape);
        EXPECT_EQ(converted.tensors[i].data, shipped.tensors[i].data) << shipped.tensors[i].name;
    }
    r = looptool::tests::run_cli(dir, "tune --greedy --bench ds/mm8_8_8 --policy new.policy");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // A damaged archive: one line, no LibTorch backtrace.
    std::string bytes = looptool::tests::slurp(dir / "old.pt");
    const size_t at = middle_of_largest_tensor(bytes);
    ASSERT_GT(at, 0u);
    bytes[at] = char(bytes[at] ^ 0x10);
    looptool::tests::write(dir, "flipped.pt", bytes);
    r = looptool::tests::run_cli(dir, "policy convert flipped.pt x.policy");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: flipped.pt: damaged policy file: checksum", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(dir.path / "x.policy"));
}

namespace {

// A learner of a small network after a few updates (so Adam has moments), and its checkpoint.
struct TrainedLearner {
    TrainConfig config;
    QNetConfig net;
    std::unique_ptr<Learner> learner;

    TrainedLearner() {
        config.batch = 8;
        config.hidden = 16;
        net.hidden = 16;
        net.shape = {2, 3};
        learner = std::make_unique<Learner>(config, net);
        PrioritizedReplay replay(64, config.per_alpha, 1);
        for (int i = 0; i < 32; ++i) {
            Transition t;
            t.state.flat.assign(size_t(net.shape.flat_size()), 0.01f * float(i));
            t.state.mask.assign(3, 1);
            t.next = t.state;
            t.action = i % 3;
            t.reward = 0.1f * float(i % 5);
            t.discount = 0.9f;
            replay.add(std::move(t));
        }
        for (int i = 0; i < 3; ++i) learner->replay_step(replay, i, nullptr);
    }
};

}  // namespace

TEST(CheckpointChecksum, AFlippedByteOrADamagedFileIsOneClearLine) {
    TempDir dir("checkpoint");
    TrainedLearner a;
    const std::string path = dir / "checkpoint.pt";
    a.learner->save_checkpoint(path, {{"env_steps", 3}});
    {
        TrainedLearner b;
        nlohmann::json counters;
        testing::internal::CaptureStderr();
        EXPECT_TRUE(b.learner->load_checkpoint(path, &counters));
        EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // no missing-checksum warning
        EXPECT_EQ(counters["env_steps"], 3);
    }
    const std::string bytes = looptool::tests::slurp(path);
    std::string flipped = bytes;
    const size_t at = middle_of_largest_tensor(flipped);
    ASSERT_GT(at, 0u);
    flipped[at] = char(flipped[at] ^ 0x10);
    const std::vector<std::pair<std::string, std::string>> damaged = {
        {"flipped.pt", flipped},
        {"cut.pt", bytes.substr(0, bytes.size() / 2)},
        {"empty.pt", ""},
        {"random.pt", std::string(4096, '\x5a')}};
    for (const auto &[name, content] : damaged) {
        looptool::tests::write(dir, name, content);
        TrainedLearner b;
        nlohmann::json counters;
        try {
            b.learner->load_checkpoint(dir / name, &counters);
            ADD_FAILURE() << name << ": resumed";
        } catch (const looptool::Error &e) {
            const std::string what = e.what();
            EXPECT_EQ(what.rfind("cannot resume from " + dir / name + ": ", 0), 0u) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
            if (name == "flipped.pt")
                EXPECT_NE(what.find("damaged checkpoint: checksum"), std::string::npos) << what;
        }
    }
}
