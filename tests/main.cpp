// The tests' main: first the restart every OpenBLAS user gets (util/openblas_restart.h), so the
// binary run by hand measures compare's OpenBLAS method as under CTest, which sets the variables.
#include <gtest/gtest.h>

#include "util/openblas_restart.h"

int main(int argc, char **argv) {
    looptune::restart_for_openblas(argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
