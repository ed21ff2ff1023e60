// argen_convert's work: any checkpoint argen reads (a model directory in any
// hub layout, or one weights file: pytorch_model.bin, a Lightning .ckpt,
// *.pt / *.pth, safetensors) written as safetensors, for the faster mmap path.
//
// Tensors keep the dtype they are stored in (BF16 / F16 / F32, also F64 and
// integers) and are written row-major (strided views are copied out). Every
// torch storage's CRC-32 is checked as it is copied, and the output is read
// back and compared byte for byte. One model.safetensors when everything fits
// in max_shard_bytes, else model-0000N-of-0000M.safetensors and
// model.safetensors.index.json (the layout SFconvertbot and save_pretrained write).
// From a directory, the other files (config.json, tokenizer.json, ...) are copied.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::convert {

struct ConvertOptions {
  std::string in;                            // a directory or one weights file
  std::string out;                           // a directory; created if missing
  uint64_t max_shard_bytes = 5'000'000'000;  // save_pretrained's default "5GB"
  bool force = false;                        // replace safetensors weights already in `out`
};

struct ConvertReport {
  int64_t tensors = 0;
  uint64_t bytes = 0;                // tensor data written
  std::vector<std::string> shards;   // file names written in `out`
  std::vector<std::string> copied;   // other files copied from the input directory
  std::vector<std::string> skipped;  // entries of the input not written (Lightning metadata, ...)
};

// Errors name the file and, where one is at fault, the tensor.
absl::StatusOr<ConvertReport> Convert(const ConvertOptions& options);

// "5GB", "500MB", "2GiB", "1000000": bytes; 0 on a malformed value.
uint64_t ParseByteSize(const std::string& text);

}  // namespace argen::convert
