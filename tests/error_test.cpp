#include "looptool/ir/error.h"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>

using namespace looptool;

TEST(Error, WarnPrintsOneLineOnStderr) {
    testing::internal::CaptureStderr();
    warn("the store of host n2 was not merged: disk full");
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "warning: the store of host n2 was not merged: disk full\n");
}

TEST(Error, FailedCheckThrowsAnInternalErrorNamingTheCondition) {
    const int slots = 2;
    try {
        LT_CHECK(slots == 3, "slot table out of step");
        FAIL() << "LT_CHECK did not throw";
    } catch (const InternalError &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("slots == 3"), std::string::npos) << what;
        EXPECT_NE(what.find("slot table out of step"), std::string::npos) << what;
        EXPECT_NE(what.find("error_test.cpp"), std::string::npos) << what;
    }
}

TEST(Error, UserErrorsAndInternalErrorsAreDistinctClasses) {
    // A catch site for user errors must not swallow a bug, and the other way round.
    EXPECT_FALSE((std::is_base_of_v<Error, InternalError>));
    EXPECT_FALSE((std::is_base_of_v<InternalError, Error>));
}
