// The seeded random-shape spec of `generate --random`: what each family promises, and the
// errors for requests it cannot meet.
#include "looptool/gen/random_shapes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "looptool/ir/error.h"

using namespace looptool;

namespace {
std::string spec_error(const RandomShapeSpec &spec) {
    try {
        random_matmul_shapes(spec);
    } catch (const Error &e) {
        return e.what();
    }
    return "<no error>";
}
}  // namespace

TEST(RandomShapes, EachFamilyKeepsItsPromise) {
    RandomShapeSpec spec;
    spec.count = 400;
    spec.seed = 7;
    spec.excluded = {"mm112_208_256"};
    auto shapes = random_matmul_shapes(spec);
    ASSERT_EQ(shapes.size(), 400u);
    std::map<ShapeFamily, int> per_family;
    std::set<std::string> names;
    int above_1024 = 0, below_16 = 0;
    for (const auto &r : shapes) {
        const auto &s = r.shape;
        ++per_family[r.family];
        EXPECT_TRUE(names.insert(s.name()).second) << "duplicate " << s.name();
        EXPECT_NE(s.name(), "mm112_208_256");
        EXPECT_LE(s.m * s.n * s.k, spec.max_macs) << s.name();
        for (int64_t d : {s.m, s.n, s.k}) {
            EXPECT_GE(d, 1);
            EXPECT_LE(d, 4096);
            above_1024 += d > 1024;
            below_16 += d < 16;
        }
        switch (r.family) {
            case ShapeFamily::LogUniform: break;
            case ShapeFamily::Skinny: EXPECT_LE(std::min({s.m, s.n, s.k}), 16) << s.name(); break;
            case ShapeFamily::Ragged:
                for (int64_t d : {s.m, s.n, s.k}) EXPECT_NE(d % 8, 0) << s.name();
                break;
            case ShapeFamily::Large:
                EXPECT_GT(4 * (s.m * s.k + s.k * s.n + s.m * s.n), spec.l2_bytes) << s.name();
                break;
        }
    }
    EXPECT_EQ(per_family[ShapeFamily::LogUniform], 160);
    EXPECT_EQ(per_family[ShapeFamily::Skinny], 80);
    EXPECT_EQ(per_family[ShapeFamily::Ragged], 80);
    EXPECT_EQ(per_family[ShapeFamily::Large], 80);
    // Log-uniform over 1..4096: both ends of the range are actually reached.
    EXPECT_GT(above_1024, 20);
    EXPECT_GT(below_16, 40);
}

TEST(RandomShapes, TheSameSeedGivesTheSameShapesAndAnotherSeedOthers) {
    RandomShapeSpec a;
    a.count = 50;
    a.seed = 3;
    auto x = random_matmul_shapes(a), y = random_matmul_shapes(a);
    a.seed = 4;
    auto z = random_matmul_shapes(a);
    auto names = [](const std::vector<RandomShape> &v) {
        std::vector<std::string> n;
        for (const auto &r : v) n.push_back(r.shape.name());
        return n;
    };
    EXPECT_EQ(names(x), names(y));
    EXPECT_NE(names(x), names(z));
}

TEST(RandomShapes, AbsurdRequestsAreRefusedWithTheReason) {
    RandomShapeSpec s;
    s.count = 0;
    EXPECT_NE(spec_error(s).find("count 0"), std::string::npos);
    s.count = 1000000;
    EXPECT_NE(spec_error(s).find("outside 1..100000"), std::string::npos);
    s.count = 10;
    s.max_macs = 1000;  // below the smallest ragged (17^3) and large (256^3) shapes
    EXPECT_NE(spec_error(s).find("--max-macs 1000 is below the smallest ragged shape"),
              std::string::npos)
        << spec_error(s);
    s.max_macs = int64_t(1) << 31;
    s.share[0] = 0.9;  // shares sum to 1.5
    EXPECT_NE(spec_error(s).find("sum to"), std::string::npos);
    // More distinct skinny shapes than the bound allows: an error, not a hang.
    RandomShapeSpec tight;
    tight.count = 300;
    tight.share[0] = 0, tight.share[1] = 1, tight.share[2] = 0, tight.share[3] = 0;
    tight.max_macs = 16 * 16 * 2;
    EXPECT_NE(spec_error(tight).find("could not draw"), std::string::npos);
}
