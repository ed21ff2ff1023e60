// One fuzz input through the PyTorch reader, for libFuzzer
// (tests/fuzz/fuzz_torch_checkpoint.cc) and the bounded mutation loop that
// runs under ctest (torch_fuzz_test.cc). The bytes are tried twice: as a
// whole file (zip directory, records, CRCs), and as data.pkl of an archive
// built around them with valid CRCs and storages of the sizes the pickle
// declares, so mutations reach the unpickler and the tensor checks instead
// of stopping at a CRC mismatch. Every tensor that opens is read in full.
// Traps when an invariant breaks (a tensor that opened but cannot be read
// consistently).
#pragma once

#include <cstddef>
#include <cstdint>

namespace argen::checkpoint::testing {

void FuzzTorchCheckpoint(const uint8_t* data, size_t size);

}  // namespace argen::checkpoint::testing
