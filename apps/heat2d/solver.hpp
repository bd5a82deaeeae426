// apps/heat2d/solver.hpp — heat2d on Crown: two dist_tensors over a rows x cols mesh,
// halos of width 1, the exchange overlapped with the interior update.
#pragma once
#include "problem.hpp"
#include <crown/checkpoint.hpp>
#include <crown/crown.hpp>
#include <crown/detail/fault.hpp>
#include <crown/stop_signal.hpp>
#include <cstdio>
#include <optional>
#include <string>
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

/// Checkpoints of the field every `every` iterations into `dir` (the newest `keep`), and
/// with `resume` a start from the newest valid one there (any rank count or mesh).
struct checkpointing {
  int every = 0; ///< 0: none
  std::string dir = "heat2d-checkpoints";
  bool resume = false;
  int keep = 2;
};

struct result {
  double seconds = 0;        ///< the slowest rank's time for the iterations
  double checksum = 0;       ///< on every rank
  int first = 0;             ///< the iteration the run started from (--resume; not sent)
  int stopped = 0;           ///< >0: left on a stop signal after this many iterations, checkpointed
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

/// Writes the field after `iteration` iterations into the checkpoint directory.
inline void save(const crown::checkpoint_dir& dir, const crown::dist_tensor<double, 2>& u,
                 const options& o, int iteration) {
  crown::checkpoint_writer w = dir.begin(iteration);
  w.write("u", u);
  w.put("iteration", std::int64_t{iteration});
  w.put("n", static_cast<std::int64_t>(o.n));
  dir.commit(w);
}

/// Reads the newest valid checkpoint into u; the iteration it was written after, or 0.
inline int resume(const crown::checkpoint_dir& dir, crown::dist_tensor<double, 2>& u,
                  const options& o) {
  const auto found = dir.newest_valid();
  if (!found) return 0;
  crown::checkpoint_reader r(u.mesh(), found->path);
  if (r.get_int("n") != static_cast<std::int64_t>(o.n))
    throw crown::argument_error(
        "heat2d --resume", found->path + " holds a grid of n = " + std::to_string(r.get_int("n")) +
                               ", not " + std::to_string(o.n));
  r.read("u", u);
  const auto iteration = static_cast<int>(r.get_int("iteration"));
  if (u.mesh().rank() == 0)
    std::printf("resumed from %s at iteration %d\n", found->path.c_str(), iteration);
  return iteration;
}

/// The run's mesh: `world` as rows x cols (decomposition()).
inline crown::mesh run_mesh(const crown::mesh& world, const options& o) {
  const auto [rows, cols] = decomposition(o, world.size());
  return world.reshape({{"rows", rows}, {"cols", cols}});
}

/// The checkpoint directory when checkpoints are written or read.
inline std::optional<crown::checkpoint_dir> checkpoints(const crown::mesh& m,
                                                        const checkpointing& ck) {
  std::optional<crown::checkpoint_dir> dir;
  if (ck.every > 0 || ck.resume) dir.emplace(m, ck.dir, ck.keep);
  return dir;
}

/// What the stepping loop reports: where it started, where it stopped, when it began.
struct loop_result {
  int first = 0;
  int stopped = 0;  ///< >0: checkpointed after this iteration and left on a stop signal
  double start = 0; ///< MPI_Wtime() after the ranks met
};

/// The stepping loop of every solver (CPU and GPU), collective over m, from iteration
/// `first` (after a sync_all): step() makes one iteration, save(it) checkpoints the field
/// after iteration it. A checkpoint every ck.every iterations; with `stop` (and a
/// checkpoint directory), a stop signal on any rank makes every rank checkpoint after the
/// iteration they agree on and return it as `stopped`.
template <class Step, class Save>
loop_result iterate(const crown::mesh& m, const options& o, const checkpointing& ck, bool have_dir,
                    const crown::stop_signals* stop, int first, Step&& step, Save&& save) {
  crown::sync_all(m);
  loop_result out{first, 0, MPI_Wtime()};
  for (int it = first; it < o.iterations; ++it) {
    crown::detail::fault_point_reached(crown::fault_point::step);
    step();
    const bool last = it + 1 == o.iterations;
    const bool due = ck.every > 0 && (it + 1) % ck.every == 0 && !last;
    if (due) { // a checkpoint may take long: the stop deadline waits meanwhile
      const crown::stop_signals::deadline_pause hold;
      save(it + 1);
    }
    if (stop && have_dir && !last && stop->requested(m.comm())) {
      if (!due) save(it + 1);
      out.stopped = it + 1;
      return out;
    }
  }
  crown::stop_signals::loop_done(); // the gather and output: no deadline
  return out;
}

/// After the loop: the slowest rank's time since it began and, unless it stopped on a
/// signal, the checksum of u (gathered on rank 0, broadcast) and the field when asked.
inline result finish(const crown::mesh& m, const crown::dist_tensor<double, 2>& u, bool keep_field,
                     const loop_result& loop) {
  result out;
  out.first = loop.first;
  out.stopped = loop.stopped;
  out.seconds = MPI_Wtime() - loop.start;
  crown::co_max(m, out.seconds);
  if (out.stopped > 0) return out;
  std::vector<double> field = u.gather(0);
  if (m.rank() == 0) out.checksum = checksum(field);
  crown::co_broadcast(m, out.checksum, 0);
  if (keep_field) out.field = std::move(field);
  return out;
}

/// Collective over `world`. Throws crown::argument_error for a mesh shape that does
/// not match the rank count, or a grid too small for it. With `stop` (and checkpoints),
/// a stop signal on any rank makes every rank checkpoint after the iteration they agree
/// on and return with `stopped` set (no checksum).
inline result solve(const crown::mesh& world, const options& o, bool keep_field,
                    const checkpointing& ck = {}, const crown::stop_signals* stop = nullptr) {
  const crown::mesh m = run_mesh(world, o);
  crown::dist_tensor<double, 2> a(m, {o.n, o.n}, placements(), halo);
  crown::dist_tensor<double, 2> b(m, {o.n, o.n}, placements(), halo);
  set_edges(a);
  set_edges(b);
  auto* u = &a;
  auto* v = &b;
  const std::optional<crown::checkpoint_dir> dir = checkpoints(m, ck);
  const int first = ck.resume ? resume(*dir, *u, o) : 0;
  const loop_result loop = iterate(
      m, o, ck, dir.has_value(), stop, first,
      [&] {
        step(*u, *v, o.overlap);
        std::swap(u, v);
      },
      [&](int it) { save(*dir, *u, o, it); });
  return finish(m, *u, keep_field, loop);
}

} // namespace heat2d
