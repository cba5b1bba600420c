# Included by the top-level CMakeLists.txt: builds fuzz/ with clang as an ExternalProject (so
# the main build keeps its compiler) and gives CTest a short run of each target.
find_program(LOOPTUNE_FUZZ_CXX NAMES clang++-19)
find_program(LOOPTUNE_FUZZ_CC NAMES clang-19)
if(NOT LOOPTUNE_FUZZ_CXX OR NOT LOOPTUNE_FUZZ_CC)
  message(STATUS "fuzz: clang-19 not found, fuzz targets not built (apt-get install clang-19 libclang-rt-19-dev)")
  return()
endif()

include(ExternalProject)
set(LOOPTUNE_FUZZ_BIN ${CMAKE_BINARY_DIR}/fuzz)
ExternalProject_Add(looptune_fuzz
  SOURCE_DIR ${PROJECT_SOURCE_DIR}/fuzz
  BINARY_DIR ${LOOPTUNE_FUZZ_BIN}
  CMAKE_ARGS -G Ninja -DCMAKE_C_COMPILER=${LOOPTUNE_FUZZ_CC} -DCMAKE_CXX_COMPILER=${LOOPTUNE_FUZZ_CXX}
             -DCMAKE_BUILD_TYPE=RelWithDebInfo
  INSTALL_COMMAND ""
  # The sources live in the main tree: let the inner ninja decide what is out of date.
  BUILD_ALWAYS ON
  USES_TERMINAL_BUILD ON)

# Seconds each target runs under CTest: 4 targets, two at a time with -j2, ~30 s of the
# suite's wall time. A longer run: docs/reliability.md.
set(LOOPTUNE_FUZZ_SECONDS 12 CACHE STRING "Seconds per fuzz target under CTest")
set(corpus ${PROJECT_SOURCE_DIR}/../shared/corpus/looptune)
set(seeds ${PROJECT_SOURCE_DIR}/fuzz/seeds)
set(fuzz_program_dirs ${seeds}/program)
set(fuzz_loop_tool_dirs ${seeds}/loop_tool ${corpus}/mm64_256_16_range ${corpus}/conv)
set(fuzz_actions_dirs ${seeds}/actions)
set(fuzz_store_dirs ${LOOPTUNE_FUZZ_BIN}/seeds/store)
foreach(target program loop_tool actions store)
  # The first directory is libFuzzer's scratch corpus (it writes new inputs there); the seed
  # directories after it are only read. A crash input is written to the scratch dir and the
  # test fails with libFuzzer's report.
  set(work ${CMAKE_BINARY_DIR}/fuzz-work/${target})
  add_test(NAME fuzz_${target}
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
            ${LOOPTUNE_FUZZ_BIN}/fuzz_${target} -max_total_time=${LOOPTUNE_FUZZ_SECONDS}
            -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
            -artifact_prefix=${work}/ ${work}/corpus ${fuzz_${target}_dirs})
  set_tests_properties(fuzz_${target} PROPERTIES LABELS fuzz TIMEOUT 120
    FIXTURES_REQUIRED fuzz_dirs)
endforeach()
add_test(NAME fuzz_make_dirs COMMAND ${CMAKE_COMMAND} -E make_directory
  ${CMAKE_BINARY_DIR}/fuzz-work/program/corpus ${CMAKE_BINARY_DIR}/fuzz-work/loop_tool/corpus
  ${CMAKE_BINARY_DIR}/fuzz-work/actions/corpus ${CMAKE_BINARY_DIR}/fuzz-work/store/corpus)
set_tests_properties(fuzz_make_dirs PROPERTIES FIXTURES_SETUP fuzz_dirs LABELS fuzz)
