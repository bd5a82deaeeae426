// apps/heat2d/problem.hpp — the heat2d problem, shared by the Crown app, the plain-MPI
// baseline in crown-bench and (in its own words) the Fortran version: n x n cells with
// fixed edges (top 1.0, left 0.5, right and bottom 0), all cells 0 at the start, and
// the explicit 5-point update
//   v = u + k * ((north + south) + (west + east) - 4 * u),   k = 0.2,
// evaluated in exactly that order. Compiled with -ffp-contract=off (no fused
// multiply-add), every cell's value is the same whatever the decomposition, so the
// checksum (the sum of all cells in global row-major order) is bitwise reproducible.
#pragma once
#include "stencil.hpp"
#include <cstddef>
#include <span>

namespace heat2d {

/// The fixed value just outside the grid: row -1 (top) or column -1 (left) etc.
inline double edge_value(std::ptrdiff_t row, std::ptrdiff_t column) {
  if (row < 0) return 1.0;
  if (column < 0) return 0.5;
  return 0.0;
}

/// Updates rows [i0, i1) x columns [j0, j1) of a block stored with one halo cell on
/// every side (`pitch` elements per stored row), from u into v.
inline void update(const double* __restrict u, double* __restrict v, std::size_t pitch,
                   std::size_t i0, std::size_t i1, std::size_t j0, std::size_t j1) {
  for (std::size_t i = i0; i < i1; ++i) {
    const double* row = u + i * pitch;
    double* out = v + i * pitch;
    for (std::size_t j = j0; j < j1; ++j)
      out[j] = updated(row[j], row[j - pitch], row[j + pitch], row[j - 1], row[j + 1]);
  }
}

/// Updates the owned cells of a rows x columns block (padded coordinates from 1,
/// `pitch` elements per stored row): all of them, the ones next to the halo only, or
/// all but those (for overlapping the halo exchange).
enum class cells { all, interior, border };
inline void update_block(const double* u, double* v, std::size_t pitch, std::size_t rows,
                         std::size_t columns, cells which) {
  if (which == cells::all) return update(u, v, pitch, 1, rows + 1, 1, columns + 1);
  if (which == cells::interior) {
    if (rows > 2 && columns > 2) update(u, v, pitch, 2, rows, 2, columns);
    return;
  }
  update(u, v, pitch, 1, 2, 1, columns + 1); // first row
  if (rows > 1) update(u, v, pitch, rows, rows + 1, 1, columns + 1);
  if (rows > 2) {
    update(u, v, pitch, 2, rows, 1, 2); // first and last column
    if (columns > 1) update(u, v, pitch, 2, rows, columns, columns + 1);
  }
}

/// The sum of every cell, in global row-major order.
inline double checksum(std::span<const double> field) {
  double sum = 0;
  for (double x : field) sum += x;
  return sum;
}

} // namespace heat2d
