// Policy files carry a checksum of their network: the shipped policy loads without a warning,
// a copy with one flipped byte in its weights is refused with one line naming the file, through
// the API and through the binary; a damaged archive never leaks LibTorch's backtrace. A policy
// whose checksum is right but whose tensors or episode length are not is refused on load, and
// training checkpoints carry a checksum of their own.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>
#include "looptool/gen/generate.h"
#include "looptool/ir/error.h"
#include "rl/learner.h"
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

namespace {

// The shipped policy rewritten with `edit` applied to its network and description; the
// checksum is recomputed, so only the loader's own checks stand between it and a tune.
void write_edited_policy(const fs::path &path, void (*edit_net)(QNet &),
                         void (*edit_meta)(nlohmann::json &)) {
    std::string meta;
    QNet net = load_policy_file(default_policy_path(), &meta);
    nlohmann::json j = nlohmann::json::parse(meta);
    if (edit_net) edit_net(net);
    if (edit_meta) edit_meta(j);
    save_policy_file(path, net, j.dump());
}

}  // namespace

TEST(PolicyShapes, ATensorOfTheWrongShapeIsABadFileNotAnInternalError) {
    TempDir dir("policy_shape");
    write_edited_policy(
        dir / "bias.pt",
        [](QNet &net) {
            torch::NoGradGuard no_grad;
            net->named_parameters()["mlp.0.bias"].set_data(torch::zeros({2}));
        },
        nullptr);
    write_edited_policy(
        dir / "weight.pt",
        [](QNet &net) {
            torch::NoGradGuard no_grad;
            auto w = net->named_parameters()["mlp.2.weight"];
            w.set_data(torch::zeros({w.size(0), 3}));
        },
        nullptr);
    for (const char *file : {"bias.pt", "weight.pt"}) {
        try {
            Policy::load(dir / file);
            ADD_FAILURE() << file << ": a policy with a wrongly shaped tensor loaded";
        } catch (const looptool::Error &e) {
            EXPECT_NE(std::string(e.what()).find("has shape ["), std::string::npos) << e.what();
        }
    }
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --greedy --bench ds/mm8_8_8 --policy bias.pt");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("error: bias.pt: not a looptune policy file: tensor mlp.0.bias has shape "
                          "[2], the network needs [",
                          0),
              0u)
        << r.err;
    r = looptool::tests::run_cli(dir,
                                 "export --tune --bench ds/mm8_8_8 --policy weight.pt --out x");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("tensor mlp.2.weight has shape"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.path / "x" / "mm8_8_8.o"));
}

TEST(PolicyShapes, AnAbsurdEpisodeLengthIsRefusedOnLoad) {
    TempDir dir("policy_steps");
    write_edited_policy(dir / "long.pt", nullptr,
                        [](nlohmann::json &j) { j["max_steps"] = 2000000000; });
    write_edited_policy(dir / "half.pt", nullptr, [](nlohmann::json &j) { j["max_steps"] = 2.5; });
    for (const char *file : {"long.pt", "half.pt"}) {
        try {
            Policy::load(dir / file);
            ADD_FAILURE() << file << ": loaded";
        } catch (const looptool::Error &e) {
            EXPECT_NE(std::string(e.what()).find("max_steps"), std::string::npos) << e.what();
        }
    }
    looptool::write_matmul_dataset({{8, 8, 8}}, (dir.path / "ds").string());
    auto r = looptool::tests::run_cli(dir, "tune --greedy --bench ds/mm8_8_8 --policy long.pt");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("max_steps 2000000000 is not an integer in [1, 1000]"), std::string::npos)
        << r.err;
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
