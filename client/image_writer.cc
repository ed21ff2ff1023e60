#include "client/image_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace argen::client {

namespace fs = std::filesystem;

std::string ImageWriter::SafeStem(std::string_view request_id) {
  std::string stem;
  for (char c : request_id.substr(0, 128)) {
    stem.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ? c : '_');
  }
  return stem.empty() ? "image" : stem;
}

ImageWriter::ImageWriter(const OutputFile& output, bool overwrite)
    : dir_(output.file.has_parent_path() ? output.file.parent_path() : fs::path(".")),
      overwrite_(overwrite),
      file_(output.file),
      file_count_(output.count) {}

fs::path ImageWriter::PathFor(std::string_view request_id, int index) const {
  if (!file_.empty()) {
    if (file_count_ == 1) return file_;
    return dir_ / absl::StrCat(file_.stem().string(), "_", index, file_.extension().string());
  }
  return dir_ / absl::StrCat(SafeStem(request_id), "_", index, ".png");
}

absl::Status ImageWriter::CheckWritable() const {
  std::error_code ec;
  fs::path p = dir_.empty() ? fs::path(".") : dir_;
  while (!fs::exists(p, ec)) {
    if (!p.has_parent_path() || p.parent_path() == p) {
      p = ".";
      break;
    }
    p = p.parent_path();
  }
  if (!fs::is_directory(p, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("output folder ", dir_.string(), ": ", p.string(), " is not a directory"));
  }
  if (access(p.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("output folder ", dir_.string(), ": cannot write in ", p.string(), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ImageWriter::CheckFree(std::string_view request_id, int count) const {
  if (overwrite_) return absl::OkStatus();
  std::error_code ec;
  for (int i = 0; i < count; ++i) {
    const fs::path path = PathFor(request_id, i);
    if (fs::exists(path, ec)) {
      return absl::AlreadyExistsError(absl::StrCat(
          path.string(), file_.empty()
                             ? " exists (pass --overwrite to replace it, or choose another --request_id or --out)"
                             : " exists (pass --overwrite to replace it, or choose another --output)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<fs::path> ImageWriter::Write(std::string_view request_id, int index, std::string_view png) {
  const fs::path path = PathFor(request_id, index);
  fs::path temp;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir_.string(), ": ", ec.message()));
    temp = dir_ / absl::StrCat(".", path.filename().string(), ".", getpid(), ".", temp_counter_++, ".tmp");
  }
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    file.write(png.data(), static_cast<std::streamsize>(png.size()));
    file.close();
    if (!file) {
      unlink(temp.c_str());
      return absl::DataLossError(absl::StrCat("cannot write ", temp.string()));
    }
  }
  if (overwrite_) {
    if (rename(temp.c_str(), path.c_str()) != 0) {
      const int e = errno;
      unlink(temp.c_str());
      return absl::DataLossError(absl::StrCat("cannot write ", path.string(), ": ", std::strerror(e)));
    }
    return path;
  }
  // link() fails when the name exists: never replaces a file, even one that
  // appeared after CheckFree.
  const int rc = link(temp.c_str(), path.c_str());
  const int e = errno;
  unlink(temp.c_str());
  if (rc != 0) {
    if (e == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(path.string(), " exists (pass --overwrite to replace it)"));
    }
    return absl::DataLossError(absl::StrCat("cannot write ", path.string(), ": ", std::strerror(e)));
  }
  return path;
}

}  // namespace argen::client
