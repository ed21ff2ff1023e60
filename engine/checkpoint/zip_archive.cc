// Zip records used (APPNOTE.TXT 4.3): end of central directory (EOCD), the
// ZIP64 EOCD locator and record, central directory file headers with the
// ZIP64 extended-information extra field, and local file headers (only to
// find where an entry's bytes start, and to check they name the same entry).
#include "engine/checkpoint/zip_archive.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace argen::checkpoint {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr size_t kEocdSize = 22;
constexpr size_t kZip64LocatorSize = 20;
constexpr size_t kZip64EocdSize = 56;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kMaxCommentSize = 0xffff;
constexpr uint16_t kZip64ExtraTag = 0x0001;

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

uint16_t Le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t Le64(const unsigned char* p) { return Le32(p) | (static_cast<uint64_t>(Le32(p + 4)) << 32); }

// [offset, offset + length) lies inside [0, limit).
bool Inside(uint64_t offset, uint64_t length, uint64_t limit) { return offset <= limit && length <= limit - offset; }

class Parser {
 public:
  Parser(const std::string& path, const unsigned char* data, size_t size) : path_(path), data_(data), size_(size) {}

  absl::Status Corrupt(const std::string& what) const {
    return absl::DataLossError(absl::StrCat(path_, ": ", what, " (truncated or not a zip archive)"));
  }

  // The directory's location and entry count, from the EOCD and, where present, the ZIP64 records.
  absl::Status ReadEnd() {
    if (size_ < kEocdSize) return Corrupt(absl::StrCat(size_, " bytes is too short for a zip archive"));
    const size_t lowest = size_ - kEocdSize > kMaxCommentSize ? size_ - kEocdSize - kMaxCommentSize : 0;
    size_t pos = size_ - kEocdSize + 1;
    bool found = false;
    while (pos-- > lowest) {
      if (Le32(data_ + pos) == kEocdSig && Le16(data_ + pos + 20) == size_ - pos - kEocdSize) {
        found = true;
        break;
      }
    }
    if (!found) return Corrupt("no end-of-central-directory record");
    const unsigned char* e = data_ + pos;
    const uint16_t disk = Le16(e + 4), cd_disk = Le16(e + 6);
    const uint16_t entries_here = Le16(e + 8);
    entries_ = Le16(e + 10);
    cd_size_ = Le32(e + 12);
    cd_offset_ = Le32(e + 16);
    directory_end_ = pos;

    const bool wants_zip64 = entries_ == 0xffff || cd_size_ == 0xffffffffu || cd_offset_ == 0xffffffffu;
    if (pos >= kZip64LocatorSize && Le32(data_ + pos - kZip64LocatorSize) == kZip64LocatorSig) {
      const unsigned char* loc = data_ + pos - kZip64LocatorSize;
      const uint64_t record = Le64(loc + 8);
      if (Le32(loc + 4) != 0 || Le32(loc + 16) > 1) {
        return absl::UnimplementedError(absl::StrCat(path_, ": multi-disk zip archives are not supported"));
      }
      if (!Inside(record, kZip64EocdSize, pos - kZip64LocatorSize) || Le32(data_ + record) != kZip64EocdSig) {
        return Corrupt(absl::StrCat("ZIP64 end-of-central-directory record expected at offset ", record));
      }
      const unsigned char* z = data_ + record;
      if (Le32(z + 16) != 0 || Le32(z + 20) != 0 || Le64(z + 24) != Le64(z + 32)) {
        return absl::UnimplementedError(absl::StrCat(path_, ": multi-disk zip archives are not supported"));
      }
      entries_ = Le64(z + 32);
      cd_size_ = Le64(z + 40);
      cd_offset_ = Le64(z + 48);
      directory_end_ = record;
    } else if (wants_zip64) {
      return Corrupt("the end record defers to a ZIP64 record that is missing");
    } else if (disk != 0 || cd_disk != 0 || entries_here != entries_) {
      return absl::UnimplementedError(absl::StrCat(path_, ": multi-disk zip archives are not supported"));
    }
    if (!Inside(cd_offset_, cd_size_, directory_end_)) {
      return Corrupt(absl::StrCat("central directory [", cd_offset_, ", +", cd_size_,
                                  ") lies outside the archive before its end record at ", directory_end_));
    }
    if (entries_ > cd_size_ / kCentralHeaderSize) {
      return Corrupt(absl::StrCat("the end record claims ", entries_, " entries but the ", cd_size_,
                                  "-byte central directory holds at most ", cd_size_ / kCentralHeaderSize));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<ZipEntry>> ReadDirectory() {
    std::vector<ZipEntry> out;
    out.reserve(static_cast<size_t>(entries_));  // bounded by cd_size / 46 above
    uint64_t at = cd_offset_;
    const uint64_t end = cd_offset_ + cd_size_;
    for (uint64_t i = 0; i < entries_; ++i) {
      if (!Inside(at, kCentralHeaderSize, end) || Le32(data_ + at) != kCentralHeaderSig) {
        return Corrupt(absl::StrCat("central directory entry ", i, " expected at offset ", at));
      }
      const unsigned char* h = data_ + at;
      const uint16_t flags = Le16(h + 8);
      const uint16_t method = Le16(h + 10);
      const uint32_t crc = Le32(h + 16);
      uint64_t csize = Le32(h + 20), usize = Le32(h + 24);
      const uint16_t name_len = Le16(h + 28), extra_len = Le16(h + 30), comment_len = Le16(h + 32);
      uint64_t disk = Le16(h + 34);
      uint64_t local = Le32(h + 42);
      const uint64_t variable = uint64_t{name_len} + extra_len + comment_len;
      if (!Inside(at + kCentralHeaderSize, variable, end)) {
        return Corrupt(absl::StrCat("central directory entry ", i, " runs past the directory"));
      }
      ZipEntry entry;
      entry.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
      const unsigned char* extra = h + kCentralHeaderSize + name_len;
      // ZIP64 extended information: only the fields saturated in the header, in this order.
      for (size_t x = 0; x + 4 <= extra_len;) {
        const uint16_t tag = Le16(extra + x), len = Le16(extra + x + 2);
        if (x + 4 + len > extra_len) return Corrupt(absl::StrCat("entry '", entry.name, "': extra field overruns"));
        if (tag == kZip64ExtraTag) {
          const unsigned char* f = extra + x + 4;
          size_t used = 0;
          auto take64 = [&](uint64_t& v) {
            if (used + 8 > len) return false;
            v = Le64(f + used);
            used += 8;
            return true;
          };
          if ((usize == 0xffffffffu && !take64(usize)) || (csize == 0xffffffffu && !take64(csize)) ||
              (local == 0xffffffffu && !take64(local))) {
            return Corrupt(absl::StrCat("entry '", entry.name, "': ZIP64 extra field is too short"));
          }
          if (disk == 0xffff) {
            if (used + 4 > len)
              return Corrupt(absl::StrCat("entry '", entry.name, "': ZIP64 extra field is too short"));
            disk = Le32(f + used);
          }
        }
        x += 4 + len;
      }
      if (usize == 0xffffffffu || csize == 0xffffffffu || local == 0xffffffffu) {
        return Corrupt(absl::StrCat("entry '", entry.name, "': sizes defer to a ZIP64 extra field that is missing"));
      }
      if (disk != 0)
        return absl::UnimplementedError(absl::StrCat(path_, ": multi-disk zip archives are not supported"));
      if ((flags & 0x1) != 0) {
        return absl::UnimplementedError(absl::StrCat(path_, ": entry '", entry.name, "' is encrypted"));
      }
      if (method == 0 && csize != usize) {
        return Corrupt(absl::StrCat("stored entry '", entry.name, "' has compressed size ", csize,
                                    " but uncompressed size ", usize));
      }
      auto data = LocateData(entry.name, local, csize);
      if (!data.ok()) return data.status();
      entry.data_offset = *data;
      entry.size = csize;
      entry.crc32 = crc;
      entry.method = method;
      out.push_back(std::move(entry));
      at += kCentralHeaderSize + variable;
    }
    return out;
  }

 private:
  // Where the entry's bytes begin: past its local header, which must name the same entry.
  absl::StatusOr<uint64_t> LocateData(const std::string& name, uint64_t local, uint64_t size) const {
    if (!Inside(local, kLocalHeaderSize, cd_offset_) || Le32(data_ + local) != kLocalHeaderSig) {
      return Corrupt(absl::StrCat("entry '", name, "': no local header at offset ", local));
    }
    const unsigned char* l = data_ + local;
    const uint16_t name_len = Le16(l + 26), extra_len = Le16(l + 28);
    const uint64_t start = local + kLocalHeaderSize + name_len + extra_len;
    if (!Inside(local + kLocalHeaderSize, uint64_t{name_len} + extra_len, cd_offset_) ||
        std::string_view(reinterpret_cast<const char*>(l + kLocalHeaderSize), name_len) != name) {
      return Corrupt(
          absl::StrCat("entry '", name, "': the local header at offset ", local, " names a different entry"));
    }
    if (!Inside(start, size, cd_offset_)) {
      return Corrupt(absl::StrCat("entry '", name, "': ", size, " bytes at offset ", start, " run past the data area (",
                                  cd_offset_, " bytes)"));
    }
    return start;
  }

  const std::string& path_;
  const unsigned char* data_;
  size_t size_;
  uint64_t entries_ = 0;
  uint64_t cd_size_ = 0;
  uint64_t cd_offset_ = 0;
  uint64_t directory_end_ = 0;
};

}  // namespace

uint32_t Crc32(const void* data, size_t size) {
  return static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(data), size));
}

absl::StatusOr<ZipArchive> ZipArchive::Parse(std::string path, const unsigned char* data, size_t size) {
  ZipArchive zip;
  zip.path_ = std::move(path);
  zip.data_ = data;
  zip.size_ = size;
  Parser parser(zip.path_, data, size);
  if (absl::Status s = parser.ReadEnd(); !s.ok()) return s;
  auto entries = parser.ReadDirectory();
  if (!entries.ok()) return entries.status();
  zip.entries_ = std::move(*entries);
  zip.by_name_.reserve(zip.entries_.size());
  for (size_t i = 0; i < zip.entries_.size(); ++i) {
    if (!zip.by_name_.emplace(zip.entries_[i].name, i).second) {
      return absl::DataLossError(
          absl::StrCat(zip.path_, ": entry '", zip.entries_[i].name, "' appears twice in the central directory"));
    }
  }
  return zip;
}

const ZipEntry* ZipArchive::Find(std::string_view name) const {
  const auto it = by_name_.find(Sv(name));
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

absl::StatusOr<std::string_view> ZipArchive::Bytes(const ZipEntry& entry) const {
  if (entry.method != 0) {
    return absl::UnimplementedError(absl::StrCat(path_, ": entry '", entry.name, "' is compressed (method ",
                                                 entry.method, "); torch.save stores entries uncompressed"));
  }
  return std::string_view(reinterpret_cast<const char*>(data_ + entry.data_offset), entry.size);
}

absl::Status ZipArchive::VerifyCrc(const ZipEntry& entry) const {
  auto bytes = Bytes(entry);
  if (!bytes.ok()) return bytes.status();
  if (entry.crc32 == 0) return absl::OkStatus();
  const uint32_t actual = Crc32(bytes->data(), bytes->size());
  if (actual != entry.crc32) {
    return absl::DataLossError(absl::StrCat(path_, ": entry '", entry.name, "' fails its CRC-32 check (recorded ",
                                            absl::Hex(entry.crc32), ", computed ", absl::Hex(actual),
                                            "): the file is corrupt"));
  }
  return absl::OkStatus();
}

}  // namespace argen::checkpoint
