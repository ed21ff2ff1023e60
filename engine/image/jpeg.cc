#include "engine/image/jpeg.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>

#include <jpeglib.h>

#include "absl/strings/str_cat.h"

namespace argen::image {
namespace {

// libjpeg reports errors by calling error_exit, which must not return: jump
// back to the caller instead of the default exit().
struct ErrorManager {
  jpeg_error_mgr base;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void OnError(j_common_ptr info) {
  auto* errors = reinterpret_cast<ErrorManager*>(info->err);
  (*info->err->format_message)(info, errors->message);
  longjmp(errors->jump, 1);
}

// The C part of encoding: no C++ objects with destructors live across setjmp.
bool EncodeC(const uint8_t* rgb, int width, int height, int quality, unsigned char** out, unsigned long* out_size,
             char* message) {
  jpeg_compress_struct info;
  ErrorManager errors;
  info.err = jpeg_std_error(&errors.base);
  errors.base.error_exit = OnError;
  if (setjmp(errors.jump)) {
    jpeg_destroy_compress(&info);
    snprintf(message, JMSG_LENGTH_MAX, "%s", errors.message);
    return false;
  }
  jpeg_create_compress(&info);
  jpeg_mem_dest(&info, out, out_size);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  info.input_components = 3;
  info.in_color_space = JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, quality, TRUE);
  if (quality >= 90) {
    for (int c = 0; c < 3; ++c) info.comp_info[c].h_samp_factor = info.comp_info[c].v_samp_factor = 1;
  }
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(rgb + static_cast<size_t>(info.next_scanline) * width * 3);
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  return true;
}

bool DecodeC(const uint8_t* data, size_t size, uint8_t** pixels, int* width, int* height, char* message) {
  jpeg_decompress_struct info;
  ErrorManager errors;
  info.err = jpeg_std_error(&errors.base);
  errors.base.error_exit = OnError;
  *pixels = nullptr;
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    free(*pixels);
    *pixels = nullptr;
    snprintf(message, JMSG_LENGTH_MAX, "%s", errors.message);
    return false;
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&info, TRUE);
  info.out_color_space = JCS_RGB;
  jpeg_start_decompress(&info);
  *width = static_cast<int>(info.output_width);
  *height = static_cast<int>(info.output_height);
  const size_t stride = static_cast<size_t>(*width) * 3;
  *pixels = static_cast<uint8_t*>(malloc(stride * static_cast<size_t>(*height)));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = *pixels + stride * info.output_scanline;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

}  // namespace

absl::StatusOr<std::string> EncodeJpeg(absl::Span<const uint8_t> rgb, int32_t width, int32_t height, int32_t quality) {
  if (width <= 0 || height <= 0 || width > 65500 || height > 65500) {
    return absl::InvalidArgumentError(absl::StrCat("JPEG: bad image shape ", width, "x", height));
  }
  if (rgb.size() != static_cast<size_t>(width) * height * 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG: ", rgb.size(), " bytes for a ", width, "x", height, " RGB image"));
  }
  if (quality < 0 || quality > 100) {
    return absl::InvalidArgumentError(absl::StrCat("JPEG: quality must be in [0, 100], got ", quality));
  }
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  char message[JMSG_LENGTH_MAX] = {};
  const bool ok = EncodeC(rgb.data(), width, height, quality, &out, &out_size, message);
  std::string bytes;
  if (ok && out != nullptr) bytes.assign(reinterpret_cast<const char*>(out), out_size);
  free(out);
  if (!ok) return absl::InternalError(absl::StrCat("JPEG encoding failed: ", message));
  return bytes;
}

absl::StatusOr<Rgb8Image> DecodeJpeg(absl::Span<const uint8_t> jpeg_bytes) {
  if (jpeg_bytes.size() < 4) return absl::InvalidArgumentError("JPEG: too short");
  uint8_t* pixels = nullptr;
  int width = 0, height = 0;
  char message[JMSG_LENGTH_MAX] = {};
  if (!DecodeC(jpeg_bytes.data(), jpeg_bytes.size(), &pixels, &width, &height, message)) {
    return absl::InvalidArgumentError(absl::StrCat("JPEG: ", message));
  }
  Rgb8Image image;
  image.width = width;
  image.height = height;
  image.rgb.assign(pixels, pixels + static_cast<size_t>(width) * height * 3);
  free(pixels);
  return image;
}

}  // namespace argen::image
