#include "engine/image/png.h"

#include <png.h>

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace argen::image {
namespace {

// Images larger than this per side are certainly a caller bug (libpng allows 2^31).
constexpr int32_t kMaxSide = 1 << 15;

absl::Status CheckShape(size_t bytes, int32_t width, int32_t height) {
  if (width <= 0 || height <= 0 || width > kMaxSide || height > kMaxSide) {
    return absl::InvalidArgumentError(
        absl::StrCat("png: image size ", width, "x", height, " is outside 1..", kMaxSide, " per side"));
  }
  const size_t expected = static_cast<size_t>(width) * height * 3;
  if (bytes != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("png: rgb buffer has ", bytes, " bytes, a ", width, "x", height, " RGB8 image needs ", expected));
  }
  return absl::OkStatus();
}

png_image RgbImageHeader(int32_t width, int32_t height) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB;
  return image;
}

}  // namespace

absl::StatusOr<std::string> EncodePng(absl::Span<const uint8_t> rgb, int32_t width, int32_t height) {
  if (absl::Status s = CheckShape(rgb.size(), width, height); !s.ok()) return s;
  // First pass sizes the output, second writes it.
  png_image image = RgbImageHeader(width, height);
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, /*convert_to_8bit=*/0, rgb.data(), /*row_stride=*/0,
                                 nullptr)) {
    const std::string msg = image.message;
    png_image_free(&image);
    return absl::InternalError(absl::StrCat("png: libpng could not encode: ", msg));
  }
  std::string out(size, '\0');
  image = RgbImageHeader(width, height);
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, rgb.data(), 0, nullptr)) {
    const std::string msg = image.message;
    png_image_free(&image);
    return absl::InternalError(absl::StrCat("png: libpng could not encode: ", msg));
  }
  out.resize(size);
  return out;
}

absl::Status WritePngFile(const std::string& path, absl::Span<const uint8_t> rgb, int32_t width, int32_t height) {
  auto bytes = EncodePng(rgb, width, height);
  if (!bytes.ok()) return bytes.status();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::StatusOr<Rgb8Image> DecodePng(absl::Span<const uint8_t> png_bytes) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, png_bytes.data(), png_bytes.size())) {
    const std::string msg = image.message;
    png_image_free(&image);
    return absl::InvalidArgumentError(absl::StrCat("png: cannot read header: ", msg));
  }
  if (image.width == 0 || image.height == 0 || image.width > kMaxSide || image.height > kMaxSide) {
    png_image_free(&image);
    return absl::InvalidArgumentError("png: image size out of range");
  }
  image.format = PNG_FORMAT_RGB;
  Rgb8Image out;
  out.width = static_cast<int32_t>(image.width);
  out.height = static_cast<int32_t>(image.height);
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, /*background=*/nullptr, out.rgb.data(), /*row_stride=*/0, nullptr)) {
    const std::string msg = image.message;
    png_image_free(&image);
    return absl::InvalidArgumentError(absl::StrCat("png: cannot decode: ", msg));
  }
  return out;
}

}  // namespace argen::image
