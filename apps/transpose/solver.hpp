// apps/transpose/solver.hpp — the Parallel Research Kernels' transpose, B += A^T then
// A += 1, on Crown: A and B are dist_tensors split by rows; each image reads the
// columns of A that become its rows of B with one-sided gets, then transposes them
// locally in tiles.
#pragma once
#include <algorithm>
#include <cmath>
#include <crown/crown.hpp>
#include <vector>

namespace transpose {

struct options {
  std::size_t order = 1024;
  int iterations = 10; ///< the first is not timed (as in the PRK)
};

struct result {
  double seconds = 0;   ///< the slowest rank's time per timed iteration
  double abs_error = 0; ///< against the closed form, summed over the whole matrix
};

inline constexpr std::size_t tile = 32;

/// B(i, j) after `iterations` steps from A(i, j) = i * order + j and B = 0.
inline double expected(std::size_t i, std::size_t j, std::size_t order, int iterations) {
  const double k = iterations;
  return k * static_cast<double>(j * order + i) + k * (k - 1) / 2;
}

/// out(i, j) += in(j, i) for the rows x cols block out (pitch out_pitch) and in
/// (pitch in_pitch), in tiles so both sides stay in cache.
inline void add_transposed(const double* in, std::size_t in_pitch, double* out,
                           std::size_t out_pitch, std::size_t rows, std::size_t cols) {
  for (std::size_t it = 0; it < rows; it += tile)
    for (std::size_t jt = 0; jt < cols; jt += tile)
      for (std::size_t i = it; i < std::min(rows, it + tile); ++i)
        for (std::size_t j = jt; j < std::min(cols, jt + tile); ++j)
          out[i * out_pitch + j] += in[j * in_pitch + i];
}

/// Collective over `world`.
inline result solve(const crown::mesh& world, const options& o) {
  const crown::mesh m = world.reshape({{"x", world.size()}});
  const std::size_t n = o.order;
  crown::dist_tensor<double, 2> a(m, {n, n}, {crown::shard(0)});
  crown::dist_tensor<double, 2> b(m, {n, n}, {crown::shard(0)});
  a.apply([&](const std::array<std::size_t, 2>& i, double& x) {
    x = static_cast<double>(i[0] * n + i[1]);
  });
  b.fill(0.0);
  const crown::box<2> mine = a.own();
  const std::size_t rows = mine.extent(0);
  std::vector<double> columns(n * rows); // A(:, my rows), n x rows
  double start = 0;
  for (int it = 0; it < o.iterations; ++it) {
    crown::sync_all(m); // A is complete
    if (it == 1) start = MPI_Wtime();
    if (rows) {
      a.read({{0, mine.lo[0]}, {n, mine.hi[0]}}, columns);
      add_transposed(columns.data(), rows, b.padded().data(), n, rows, n);
    }
    crown::sync_all(m); // nobody reads A any more
    a.apply([](const std::array<std::size_t, 2>&, double& x) { x += 1.0; });
  }
  result r;
  r.seconds = o.iterations > 1 ? (MPI_Wtime() - start) / (o.iterations - 1) : 0;
  crown::co_max(m, r.seconds);
  b.apply([&](const std::array<std::size_t, 2>& i, double& x) {
    r.abs_error += std::abs(x - expected(i[0], i[1], n, o.iterations));
  });
  crown::co_sum(m, r.abs_error);
  return r;
}

} // namespace transpose
