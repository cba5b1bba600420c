// FirstError (rl/first_error.h): an error thrown on another thread comes back with its
// class and its origin, and only the first one is kept.
#include "rl/first_error.h"

#include <gtest/gtest.h>

#include <new>
#include <thread>

#include "looptool/ir/error.h"

using looptune::FirstError;

TEST(FirstError, KeepsTheClassAndTheOriginOfTheFirstError) {
    FirstError error;
    EXPECT_TRUE(error.empty());
    std::thread([&] {
        try {
            throw looptool::InternalError("index out of range");
        } catch (...) {
            EXPECT_TRUE(error.capture("actor 1"));
        }
        try {
            throw looptool::Error("bad file");
        } catch (...) {
            EXPECT_FALSE(error.capture("actor 0"));  // a later one is dropped
        }
    }).join();
    ASSERT_FALSE(error.empty());
    EXPECT_EQ(error.where(), "actor 1");
    try {
        error.rethrow(" (rerun with --resume)");
        FAIL();
    } catch (const looptool::InternalError &e) {
        EXPECT_STREQ(e.what(), "actor 1: index out of range (rerun with --resume)");
    }
}

TEST(FirstError, UserErrorsStayUserErrorsAndForeignOnesPassUnchanged) {
    FirstError user, foreign;
    try {
        throw looptool::Error("no such dataset");
    } catch (...) {
        user.capture("learner");
    }
    EXPECT_THROW(user.rethrow(), looptool::Error);
    try {
        throw std::bad_alloc();
    } catch (...) {
        foreign.capture("learner");
    }
    EXPECT_THROW(foreign.rethrow(), std::bad_alloc);
}
