// apps/heat2d/heatmap_png.hpp — a field written as a PNG heat map (libpng).
#pragma once
#include <cstddef>
#include <span>
#include <string>

namespace heat2d {

/// Writes a rows x columns field (row-major) as an RGB PNG, mapping [lo, hi] through a
/// black - red - yellow - white scale. Throws std::runtime_error naming the file when
/// it cannot be written.
void write_heatmap_png(const std::string& path, std::span<const double> field, std::size_t rows,
                       std::size_t columns, double lo, double hi);

} // namespace heat2d
