// A field as a PNG heat map (apps/heat2d/heatmap_png.hpp).
#include "heatmap_png.hpp"
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <png.h>
#include <stdexcept>
#include <vector>

namespace heat2d {
namespace {

/// Black (0) - red - yellow - white (1), like a hot-iron scale.
void colour(double t, unsigned char* rgb) {
  t = std::clamp(t, 0.0, 1.0);
  rgb[0] = static_cast<unsigned char>(255 * std::min(1.0, 3 * t));
  rgb[1] = static_cast<unsigned char>(255 * std::clamp(3 * t - 1, 0.0, 1.0));
  rgb[2] = static_cast<unsigned char>(255 * std::clamp(3 * t - 2, 0.0, 1.0));
}

} // namespace

void write_heatmap_png(const std::string& path, std::span<const double> field, std::size_t rows,
                       std::size_t columns, double lo, double hi) {
  if (field.size() != rows * columns)
    throw std::invalid_argument("heat map " + path + ": " + std::to_string(field.size()) +
                                " values for " + std::to_string(rows) + " x " +
                                std::to_string(columns));
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"),
                                                             &std::fclose);
  if (!file) throw std::runtime_error("heat map " + path + ": " + std::strerror(errno));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    throw std::runtime_error("heat map " + path + ": libpng could not start");
  }
  std::vector<unsigned char> row(3 * columns);
  if (setjmp(png_jmpbuf(png))) { // libpng reports errors by longjmp
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("heat map " + path + ": libpng failed writing it");
  }
  png_init_io(png, file.get());
  png_set_IHDR(png, info, static_cast<png_uint_32>(columns), static_cast<png_uint_32>(rows), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  const double span = hi > lo ? hi - lo : 1.0;
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < columns; ++j)
      colour((field[i * columns + j] - lo) / span, &row[3 * j]);
    png_write_row(png, row.data());
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
}

} // namespace heat2d
