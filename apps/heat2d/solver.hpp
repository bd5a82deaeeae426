// apps/heat2d/solver.hpp — heat2d on Crown: two dist_tensors over a rows x cols mesh,
// halos of width 1, the exchange overlapped with the interior update.
#pragma once
#include "problem.hpp"
#include <crown/crown.hpp>
#include <utility>
#include <vector>

namespace heat2d {

struct options {
  std::size_t n = 1024;
  int iterations = 100;
  int rows = 0; ///< mesh shape; 0 x 0: the squarest factorisation of the rank count
  int cols = 0;
  bool overlap = true; ///< update the interior while the halos travel
  template <class Ar>
  void serialize(Ar& ar) {
    ar(n, iterations, rows, cols, overlap);
  }
};

struct result {
  double seconds = 0;        ///< the slowest rank's time for the iterations
  double checksum = 0;       ///< on every rank
  std::vector<double> field; ///< the final field, row-major, on rank 0 (when asked for)
  template <class Ar>
  void serialize(Ar& ar) {
    ar(seconds, checksum, field);
  }
};

/// The squarest rows x cols with rows * cols = ranks (rows <= cols).
inline std::pair<int, int> squarest(int ranks) {
  int rows = 1;
  for (int r = 1; r * r <= ranks; ++r)
    if (ranks % r == 0) rows = r;
  return {rows, ranks / rows};
}

/// Sets the halo cells that lie outside the grid to the fixed edge values.
inline void set_edges(crown::dist_tensor<double, 2>& t) {
  const auto own = t.own();
  const auto p = t.padded();
  for (std::size_t i = 0; i < p.extent(0); ++i)
    for (std::size_t j = 0; j < p.extent(1); ++j) {
      const auto row = static_cast<std::ptrdiff_t>(own.lo[0] + i) - 1;
      const auto col = static_cast<std::ptrdiff_t>(own.lo[1] + j) - 1;
      const auto n = static_cast<std::ptrdiff_t>(t.shape()[0]);
      p(i, j) = (row < 0 || col < 0 || row >= n || col >= n) ? edge_value(row, col) : 0.0;
    }
}

/// The mesh shape for `ranks` ranks: the one asked for, or the squarest. Throws
/// crown::argument_error for a shape that does not match the rank count.
inline std::pair<int, int> decomposition(const options& o, int ranks) {
  const auto [rows, cols] = o.rows > 0 ? std::pair{o.rows, o.cols} : squarest(ranks);
  if (rows * cols != ranks)
    throw crown::argument_error("heat2d", "mesh " + std::to_string(rows) + "x" +
                                              std::to_string(cols) + " for " +
                                              std::to_string(ranks) + " ranks");
  return {rows, cols};
}

/// Both fields: blocks over rows x cols, halos of width 1 (edges not periodic).
inline std::vector<crown::placement> placements() { return {crown::shard(0), crown::shard(1)}; }
inline constexpr crown::halo_spec<2> halo{{1, 1}, {false, false}};

/// One iteration from u into v, collective over their mesh: the halo exchange
/// (overlapped with the interior update when asked) and the update of every owned cell.
inline void step(crown::dist_tensor<double, 2>& u, crown::dist_tensor<double, 2>& v, bool overlap) {
  const std::size_t pitch = u.padded().extent(1);
  const std::size_t r = u.own().extent(0), c = u.own().extent(1);
  if (overlap) {
    u.exchange_halos_start();
    update_block(u.padded().data(), v.padded().data(), pitch, r, c, cells::interior);
    u.exchange_halos_finish();
    update_block(u.padded().data(), v.padded().data(), pitch, r, c, cells::border);
  } else {
    u.exchange_halos();
    update_block(u.padded().data(), v.padded().data(), pitch, r, c, cells::all);
  }
}

/// Collective over `world`. Throws crown::argument_error for a mesh shape that does
/// not match the rank count, or a grid too small for it.
inline result solve(const crown::mesh& world, const options& o, bool keep_field) {
  const auto [rows, cols] = decomposition(o, world.size());
  const crown::mesh m = world.reshape({{"rows", rows}, {"cols", cols}});
  crown::dist_tensor<double, 2> a(m, {o.n, o.n}, placements(), halo);
  crown::dist_tensor<double, 2> b(m, {o.n, o.n}, placements(), halo);
  set_edges(a);
  set_edges(b);
  auto* u = &a;
  auto* v = &b;
  crown::sync_all(m);
  const double start = MPI_Wtime();
  for (int it = 0; it < o.iterations; ++it) {
    step(*u, *v, o.overlap);
    std::swap(u, v);
  }
  result out;
  out.seconds = MPI_Wtime() - start;
  crown::co_max(m, out.seconds);
  std::vector<double> field = u->gather(0);
  if (m.rank() == 0) out.checksum = checksum(field);
  crown::co_broadcast(m, out.checksum, 0);
  if (keep_field) out.field = std::move(field);
  return out;
}

} // namespace heat2d
