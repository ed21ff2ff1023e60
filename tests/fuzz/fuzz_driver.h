// The libFuzzer entry points every fuzz target under tests/fuzz defines.
//
// A target is one .cc file that defines LLVMFuzzerTestOneInput (and, if it
// needs set-up, LLVMFuzzerInitialize). Built with clang and
// -fsanitize=fuzzer (scripts/fuzz.sh) libFuzzer supplies main(); in the normal
// build fuzz_driver.cc does: it replays the committed corpus, then feeds
// seeded random mutations of it for a bounded time, so CI (gcc, no libFuzzer)
// runs every target as a ctest test. See docs/fuzzing.md.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
// Must return 0. Any crash, sanitizer report, uncaught exception or abort is a
// finding. Must not keep state between calls that changes its behaviour.
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional, called once before the first input.
int LLVMFuzzerInitialize(int* argc, char*** argv);
}
