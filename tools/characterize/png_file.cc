#include "tools/characterize/png_file.h"

#include <png.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"

namespace argen::characterize {

absl::Status WritePng(const Rgb8Image& image, const std::string& path) {
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3) {
    return absl::InvalidArgumentError(absl::StrCat("png ", path, ": bad image ", image.width, "x", image.height));
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return absl::NotFoundError(absl::StrCat("png ", path, ": cannot open for writing"));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    return absl::InternalError(absl::StrCat("png ", path, ": libpng failed"));
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, image.width, image.height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int32_t y = 0; y < image.height; ++y) {
    png_write_row(png, const_cast<png_bytep>(image.rgb.data() + static_cast<size_t>(y) * image.width * 3));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(f) != 0) return absl::DataLossError(absl::StrCat("png ", path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace argen::characterize
