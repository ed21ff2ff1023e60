// argen_convert: writes safetensors from any checkpoint argen reads, for the
// faster load path (no pickle, no CRC pass; docs/checkpoint-format.md).
//
//   argen_convert --in DIR_OR_FILE --out DIR [--max_shard_size 5GB] [--force]
//
// --in: a model directory (model.safetensors[.index.json] or
// pytorch_model.bin[.index.json], as the hub ships it) or one weights file
// (pytorch_model.bin, a Lightning .ckpt, *.pt, *.pth, *.safetensors).
// Exit status: 0 on success, 1 when conversion fails (the message names the
// file and tensor), 2 on bad usage.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/convert/convert.h"

ABSL_FLAG(std::string, in, "", "model directory or weights file to read");
ABSL_FLAG(std::string, out, "", "directory to write model.safetensors (or shards + index) into");
ABSL_FLAG(std::string, max_shard_size, "5GB", "largest shard, e.g. 5GB, 500MB, 2GiB (bytes without a unit)");
ABSL_FLAG(bool, force, false, "replace safetensors weights already in --out");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "argen_convert --in DIR_OR_FILE --out DIR [--max_shard_size 5GB] [--force]\n"
      "Writes safetensors from a PyTorch (.bin / .ckpt / .pt) or safetensors checkpoint.");
  absl::ParseCommandLine(argc, argv);
  argen::convert::ConvertOptions options;
  options.in = absl::GetFlag(FLAGS_in);
  options.out = absl::GetFlag(FLAGS_out);
  options.force = absl::GetFlag(FLAGS_force);
  options.max_shard_bytes = argen::convert::ParseByteSize(absl::GetFlag(FLAGS_max_shard_size));
  if (options.in.empty() || options.out.empty() || options.max_shard_bytes == 0) {
    std::fprintf(stderr,
                 "argen_convert: --in and --out are required and --max_shard_size must be a size "
                 "such as 5GB (got '%s')\n",
                 absl::GetFlag(FLAGS_max_shard_size).c_str());
    return 2;
  }
  absl::StatusOr<argen::convert::ConvertReport> report = argen::convert::Convert(options);
  if (!report.ok()) {
    std::fprintf(stderr, "argen_convert: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  for (const std::string& s : report->skipped) std::printf("skipped (not a tensor of the state dict): %s\n", s.c_str());
  for (const std::string& f : report->copied) std::printf("copied %s\n", f.c_str());
  std::printf("wrote %lld tensors, %llu bytes, into %s: ", static_cast<long long>(report->tensors),
              static_cast<unsigned long long>(report->bytes), options.out.c_str());
  for (size_t i = 0; i < report->shards.size(); ++i) std::printf("%s%s", i ? ", " : "", report->shards[i].c_str());
  std::printf(" (read back and verified)\n");
  return 0;
}
