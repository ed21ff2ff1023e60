// The central directory of a zip archive whose entries are stored (not
// compressed), as torch.save writes them: entries are located, never
// extracted, so a storage can be read in place from a memory mapping.
// ZIP64 records (archives or entries over 4 GiB) are understood. Parsing
// checks every offset and size against the bytes given and allocates only in
// proportion to the directory actually present.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argen::checkpoint {

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // from the start of the archive, past the local header
  uint64_t size = 0;         // stored bytes (= uncompressed size for a stored entry)
  uint32_t crc32 = 0;        // as recorded; 0 when the writer skipped it (torch set_crc32_options(False))
  uint16_t method = 0;       // 0 = stored
};

class ZipArchive {
 public:
  // `path` names the archive in errors; `data` must outlive the archive.
  static absl::StatusOr<ZipArchive> Parse(std::string path, const unsigned char* data, size_t size);

  const std::string& path() const { return path_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }
  // nullptr when absent.
  const ZipEntry* Find(std::string_view name) const;
  // The entry's bytes in place; an error when it is compressed or encrypted.
  absl::StatusOr<std::string_view> Bytes(const ZipEntry& entry) const;
  // Compares the CRC-32 of the entry's bytes with the recorded one (a recorded
  // 0 means "not computed" and passes).
  absl::Status VerifyCrc(const ZipEntry& entry) const;

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
  std::vector<ZipEntry> entries_;
  absl::flat_hash_map<std::string, size_t> by_name_;
};

// CRC-32 (zlib's) of bytes, for writers and tests.
uint32_t Crc32(const void* data, size_t size);

}  // namespace argen::checkpoint
