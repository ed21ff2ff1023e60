#include "engine/image/png.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

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

struct Sink {
  std::string bytes;
  std::string error;
};

void WriteData(png_structp png, png_bytep data, png_size_t length) {
  auto* sink = static_cast<Sink*>(png_get_io_ptr(png));
  sink->bytes.append(reinterpret_cast<const char*>(data), length);
}

void Flush(png_structp) {}

void OnError(png_structp png, png_const_charp message) {
  auto* sink = static_cast<Sink*>(png_get_error_ptr(png));
  sink->error = message;
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}

// libpng reports errors by longjmp: nothing with a destructor may live in this
// frame between setjmp and the calls that can fail.
bool Encode(Sink* sink, const uint8_t* rgb, int32_t width, int32_t height, const PngOptions& options, png_bytep* rows) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, sink, OnError, OnWarning);
  if (png == nullptr) {
    sink->error = "out of memory";
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    sink->error = "out of memory";
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, sink, WriteData, Flush);
  png_set_compression_level(png, options.compression_level);
  if (options.filter_sub) png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
  for (int32_t y = 0; y < height; ++y) rows[y] = const_cast<png_bytep>(rgb + static_cast<size_t>(y) * width * 3);
  png_set_rows(png, info, rows);
  png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

absl::StatusOr<std::string> EncodePng(absl::Span<const uint8_t> rgb, int32_t width, int32_t height,
                                      const PngOptions& options) {
  if (absl::Status s = CheckShape(rgb.size(), width, height); !s.ok()) return s;
  if (options.compression_level < 0 || options.compression_level > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("png: compression level ", options.compression_level, " is outside 0..9"));
  }
  Sink sink;
  sink.bytes.reserve(rgb.size() / 2 + 1024);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  if (!Encode(&sink, rgb.data(), width, height, options, rows.data())) {
    return absl::InternalError(absl::StrCat("png: libpng could not encode: ", sink.error));
  }
  return std::move(sink.bytes);
}

absl::Status WritePngFile(const std::string& path, absl::Span<const uint8_t> rgb, int32_t width, int32_t height,
                          const PngOptions& options) {
  absl::StatusOr<std::string> bytes = EncodePng(rgb, width, height, options);
  if (!bytes.ok()) return absl::Status(bytes.status().code(), absl::StrCat(path, ": ", bytes.status().message()));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  const size_t written = std::fwrite(bytes->data(), 1, bytes->size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != bytes->size() || !closed) return absl::DataLossError(absl::StrCat(path, ": write failed"));
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
