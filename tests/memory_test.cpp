// Memory estimates before allocating (looptool/ir/memory.h): an oversized problem is refused at
// once, with the figure, instead of ending in std::bad_alloc minutes later.
#include "looptool/ir/memory.h"

#include <gtest/gtest.h>

#include <chrono>

#include "env/environment.h"
#include "looptool/check/verify.h"
#include "looptool/ir/error.h"

namespace looptool {
namespace {

std::string error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const Error &e) {
        return e.what();
    }
    return "(no error)";
}

TEST(Memory, BufferBytesCountEveryTensorInFloat) {
    EXPECT_EQ(buffer_bytes(make_matmul(2, 3, 4)), (2 * 4 + 4 * 3 + 2 * 3 + 2 * 3) * 4);
    EXPECT_GT(available_memory(), 0);  // /proc/meminfo is there on Linux
    EXPECT_EQ(format_bytes(25.6e9), "25.6 GB");
    EXPECT_EQ(format_bytes(512e6), "512.0 MB");
}

TEST(Memory, AnOversizedMatmulIsRefusedBeforeAnythingIsAllocated) {
    looptune::EnvConfig cfg;
    cfg.measure_enabled = false;
    looptune::Environment env(cfg);
    auto big = std::make_shared<Computation>(make_matmul(40000, 40000, 40000));
    if (available_memory() >= buffer_bytes(*big))
        GTEST_SKIP() << "this machine has room for 25.6 GB";
    const auto t0 = std::chrono::steady_clock::now();
    const std::string msg = error_of([&] { env.reset(Program::naive(big)); });
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
    // 4 tensors of 1.6e9 floats: 25.6 GB, above this 24 GiB machine's memory.
    EXPECT_NE(msg.find("mm40000_40000_40000: needs 25.6 GB for its tensors, above the"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("MemAvailable"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos);
    // The environment is still usable.
    env.reset(Program::naive(std::make_shared<Computation>(make_matmul(4, 4, 4))));
    EXPECT_TRUE(env.verify(env.program()).ok);
}

TEST(Memory, MaxMemoryIsALimitBelowWhatIsAvailable) {
    looptune::EnvConfig cfg;
    cfg.measure_enabled = false;
    cfg.max_memory = 1'000'000;
    looptune::Environment env(cfg);
    auto c = std::make_shared<Computation>(make_matmul(256, 256, 256));  // 1.05 MB of tensors
    const std::string msg = error_of([&] { env.reset(Program::naive(c)); });
    EXPECT_NE(
        msg.find("needs 1.0 MB for its tensors, above the memory limit of 1.0 MB (--max-memory)"),
        std::string::npos)
        << msg;
    cfg.max_memory = 2'000'000;
    looptune::Environment roomier(cfg);
    EXPECT_NO_THROW(roomier.reset(Program::naive(c)));
    // With verify, the reference and a second set of buffers count too.
    cfg.verify = true;
    looptune::Environment verifying(cfg);
    EXPECT_THROW(verifying.reset(Program::naive(c)), Error);
}

}  // namespace
}  // namespace looptool
