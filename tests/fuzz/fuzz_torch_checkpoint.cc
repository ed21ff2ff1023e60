// Fuzzes the PyTorch checkpoint reader (engine/checkpoint/torch_file.h): each
// input is tried as a whole torch.save archive and as the data.pkl of an
// archive built around it (engine/checkpoint/tests/torch_fuzz.h). Corpus:
// corpus/fuzz_torch_checkpoint (archives and data.pkl streams made by
// torch.save, tools/goldens/make_torch_goldens.py). In every build the same
// harness also runs as a bounded seeded mutation loop under ctest
// (engine/checkpoint/tests/torch_fuzz_test.cc, with an allocation cap).
#include <cstddef>
#include <cstdint>

#include "engine/checkpoint/tests/torch_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  argen::checkpoint::testing::FuzzTorchCheckpoint(data, size);
  return 0;
}
