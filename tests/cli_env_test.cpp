// The environment-level subcommands through the built binary: read's per-step table and
// observations, graphs, search, validate and the measurement store.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "looptool/formats/text_format.h"
#include "test_util.h"

using namespace looptool;
using tests::run_cli;
using tests::write;

// MAX_GFLOPS (set in each test) fixes the roof, so no test measures the machine's peak.

TEST(CliEnv, ReadPrintsAStepTableObservationsAndGraphs) {
    tests::TempDir dir("cli_env_read");
    write(dir, "mm.lt", serialize(tests::matmul_program(24, 40, 16)));
    setenv("MAX_GFLOPS", "100", 1);
    auto r = run_cli(dir,
                     "read --bench mm.lt --actions split_8,down,up --observe "
                     "flops,prev_actions_tensor --json --graph dot");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["steps"].size(), 4u);  // the start and three actions
    EXPECT_EQ(j["steps"][1]["action"], "split_8");
    EXPECT_GT(j["steps"][1]["gflops"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(
        j["steps"][1]["reward"].get<double>(),
        (j["steps"][1]["gflops"].get<double>() - j["steps"][0]["gflops"].get<double>()) / 100);
    EXPECT_EQ(j["steps"][2]["reward"].get<double>(), 0.0);  // a cursor move
    auto obs = j["steps"][3]["observations"];
    ASSERT_EQ(obs.size(), 2u);
    EXPECT_EQ(obs[1]["space"], "prev_actions_tensor");
    EXPECT_EQ(obs[1]["shape"], (std::vector<int64_t>{5, 17}));
    EXPECT_TRUE(j["verified"].get<bool>());
    EXPECT_NE(j["loop_tree_graph"].get<std::string>().find("digraph"), std::string::npos);

    auto t = run_cli(dir, "read --bench mm.lt --actions split_8 --quiet");
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("step  action       legal     GFLOPS    reward   %peak"),
              std::string::npos)
        << t.out;
    EXPECT_NE(t.out.find("split_8      yes"), std::string::npos) << t.out;

    auto g = run_cli(dir, "read --bench mm.lt --no-measure --graph graphml");
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("<graphml"), std::string::npos);
    auto bad = run_cli(dir, "read --bench mm.lt --observe loop_tensor");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("loop_tensor"), std::string::npos) << bad.err;
}

TEST(CliEnv, SearchStoreAndValidateAgree) {
    tests::TempDir dir("cli_env_search");
    write(dir, "mm.lt", serialize(tests::matmul_program(32, 32, 16)));
    setenv("MAX_GFLOPS", "100", 1);
    auto s = run_cli(
        dir, "search --bench mm.lt --algo greedy1 --budget-s 5 --steps 3 --store m.db --json");
    ASSERT_EQ(s.exit_code, 0) << s.err;
    auto j = nlohmann::json::parse(s.out);
    EXPECT_TRUE(j["verified"].get<bool>());
    EXPECT_GE(j["gflops"].get<double>(), j["base_gflops"].get<double>());
    auto st = run_cli(dir, "store stats --store m.db --json");
    ASSERT_EQ(st.exit_code, 0) << st.err;
    EXPECT_GE(nlohmann::json::parse(st.out)["measurements"].get<int64_t>(),
              j["schedules_measured"].get<int64_t>());

    // Replaying the search's best sequence through the same store reproduces its GFLOPS.
    std::string actions;
    for (const auto &a : j["actions"])
        actions += (actions.empty() ? "" : " ") + a.get<std::string>();
    write(dir, "episodes.csv",
          "benchmark,actions,gflops\nmm.lt,\"" + actions + "\"," +
              std::to_string(j["gflops"].get<double>()) + "\nmm.lt,split_8,0.001\nmm.lt,up,1\n");
    auto v = run_cli(dir, "validate episodes.csv --store m.db --tolerance-pct 1 --json");
    EXPECT_EQ(v.exit_code, 2) << v.err;  // episodes 2 (GFLOPS) and 3 (illegal) disagree
    auto vj = nlohmann::json::parse(v.out);
    EXPECT_EQ(vj["disagreements"], 2);
    EXPECT_TRUE(vj["results"][0]["ok"].get<bool>()) << vj.dump(2);
    EXPECT_FALSE(vj["results"][1]["ok"].get<bool>());
    EXPECT_NE(vj["results"][2]["problems"][0].get<std::string>().find("illegal action up"),
              std::string::npos);
    auto missing = run_cli(dir, "validate nope.csv");
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("nope.csv"), std::string::npos);
}
