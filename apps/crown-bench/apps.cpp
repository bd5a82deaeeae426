// crown-bench apps: heat2d and the PRK transpose on Crown (apps/heat2d, apps/transpose)
// beside plain-MPI versions written here, on the same ranks in the same run: the halo
// exchange with MPI_Sendrecv on a Cartesian communicator, the transpose with
// MPI_Alltoallv; and dist_tensor's redistribution (rows to columns) against the same
// data motion with MPI_Alltoallv. Both sides share the problem and the compute kernels, so the
// comparison is about moving the data; heat2d's checksums must agree bitwise.
#include "../heat2d/solver.hpp"
#include "../transpose/solver.hpp"
#include "bench.hpp"
#include <array>
#include <crown/crown.hpp>
#if CROWN_HAVE_CUDA
#include "../heat2d/gpu_kernels.hpp"
#include <crown/detail/device_heap.hpp>
#endif

namespace crown_bench {
namespace {

struct block_range {
  std::size_t lo, hi;
  [[nodiscard]] std::size_t size() const { return hi - lo; }
};
/// The same ceil-sized blocks as dist_tensor.
block_range block(std::size_t n, int parts, int k) {
  const std::size_t b = (n + static_cast<std::size_t>(parts) - 1) / static_cast<std::size_t>(parts);
  const std::size_t lo = std::min(n, static_cast<std::size_t>(k) * b);
  return {lo, std::min(n, lo + b)};
}

#if CROWN_HAVE_CUDA
/// heat2d's iterations on the GPU with halos staged by hand; the field `u` (host, with
/// its halo) goes to the device first and comes back at the end. Returns seconds.
double cuda_mpi_iterations(const heat2d::options& o, double* u_host, std::size_t pitch,
                           std::size_t r, std::size_t c, MPI_Comm cart,
                           std::array<int, 4> neighbours) {
  namespace gpu = heat2d::gpu;
  const auto [up, down, left, right] = neighbours;
  gpu::use_device(std::max(crown::detail::device_ordinal(), 0));
  const gpu::stream s;
  const std::size_t count = (r + 2) * pitch;
  const gpu::buffer a(count), b(count);
  gpu::copy(a.data(), u_host, count * sizeof(double), s.get());
  gpu::copy(b.data(), u_host, count * sizeof(double), s.get()); // fixed edges in both
  std::vector<double> out(std::max(r, c)), in(std::max(r, c));
  // One halo: `n` elements `step` apart from the device at `from` to `to` (MPI rank),
  // and from `back` into the device at `into` (skipped at the domain's edge).
  auto exchange = [&](const double* from, int to, double* into, int back, std::size_t n,
                      std::size_t step, int tag) {
    const std::size_t stride = step * sizeof(double);
    if (to != MPI_PROC_NULL) {
      if (step == 1) // a row: one contiguous copy
        gpu::copy(out.data(), from, n * sizeof(double), s.get());
      else
        gpu::copy_rows(out.data(), sizeof(double), from, stride, sizeof(double), n, s.get());
    }
    MPI_Sendrecv(out.data(), static_cast<int>(n), MPI_DOUBLE, to, tag, in.data(),
                 static_cast<int>(n), MPI_DOUBLE, back, tag, cart, MPI_STATUS_IGNORE);
    if (back != MPI_PROC_NULL) {
      if (step == 1)
        gpu::copy(into, in.data(), n * sizeof(double), s.get());
      else
        gpu::copy_rows(into, stride, in.data(), sizeof(double), sizeof(double), n, s.get());
    }
  };
  double* u = a.data();
  double* v = b.data();
  MPI_Barrier(cart);
  const double start = MPI_Wtime();
  for (int it = 0; it < o.iterations; ++it) {
    exchange(u + pitch + 1, up, u + (r + 1) * pitch + 1, down, c, 1, 0);
    exchange(u + r * pitch + 1, down, u + 1, up, c, 1, 1);
    exchange(u + pitch + 1, left, u + pitch + c + 1, right, r, pitch, 2);
    exchange(u + pitch + c, right, u + pitch, left, r, pitch, 3);
    gpu::update(u, v, pitch, r, c, s.get());
    std::swap(u, v);
  }
  s.synchronize();
  const double seconds = MPI_Wtime() - start;
  gpu::copy(u_host, u, count * sizeof(double), s.get());
  return seconds;
}
#endif

} // namespace

/// heat2d with MPI_Sendrecv halo exchanges; returns seconds, sets the checksum. With
/// `on_gpu` (CUDA builds) the fields live in device memory, updated by heat2d's CUDA
/// kernel, and each halo travels device -> host -> MPI_Sendrecv -> device by hand
/// (cudaMemcpy, cudaMemcpy2D for columns; MPI need not be CUDA-aware): the plain
/// CUDA+MPI version crown-heat2d --gpu is measured against.
double mpi_heat2d(const heat2d::options& o, double& checksum, bool on_gpu) {
  int size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto [rows, cols] = heat2d::squarest(size);
  int dims[2] = {rows, cols}, periods[2] = {0, 0}, coords[2];
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
  MPI_Comm_rank(cart, &me);
  MPI_Cart_coords(cart, me, 2, coords);
  const block_range br = block(o.n, rows, coords[0]), bc = block(o.n, cols, coords[1]);
  const std::size_t r = br.size(), c = bc.size(), pitch = c + 2;
  std::vector<double> a((r + 2) * pitch), b((r + 2) * pitch);
  for (std::size_t i = 0; i < r + 2; ++i)
    for (std::size_t j = 0; j < pitch; ++j) {
      const auto gi = static_cast<std::ptrdiff_t>(br.lo + i) - 1;
      const auto gj = static_cast<std::ptrdiff_t>(bc.lo + j) - 1;
      const auto n = static_cast<std::ptrdiff_t>(o.n);
      a[i * pitch + j] = b[i * pitch + j] =
          (gi < 0 || gj < 0 || gi >= n || gj >= n) ? heat2d::edge_value(gi, gj) : 0.0;
    }
  int up, down, left, right;
  MPI_Cart_shift(cart, 0, 1, &up, &down);
  MPI_Cart_shift(cart, 1, 1, &left, &right);
  MPI_Datatype column;
  MPI_Type_vector(static_cast<int>(r), 1, static_cast<int>(pitch), MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  double* u = a.data();
  double* v = b.data();
  const int ci = static_cast<int>(c);
  double seconds = 0;
  if (on_gpu) {
#if CROWN_HAVE_CUDA
    seconds = cuda_mpi_iterations(o, u, pitch, r, c, cart, {up, down, left, right});
#else
    throw crown::state_error("crown-bench: heat2d on a GPU", "built without CUDA");
#endif
  } else {
    MPI_Barrier(cart);
    const double start = MPI_Wtime();
    for (int it = 0; it < o.iterations; ++it) {
      MPI_Sendrecv(u + pitch + 1, ci, MPI_DOUBLE, up, 0, u + (r + 1) * pitch + 1, ci, MPI_DOUBLE,
                   down, 0, cart, MPI_STATUS_IGNORE);
      MPI_Sendrecv(u + r * pitch + 1, ci, MPI_DOUBLE, down, 1, u + 1, ci, MPI_DOUBLE, up, 1, cart,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(u + pitch + 1, 1, column, left, 2, u + pitch + c + 1, 1, column, right, 2, cart,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(u + pitch + c, 1, column, right, 3, u + pitch, 1, column, left, 3, cart,
                   MPI_STATUS_IGNORE);
      heat2d::update_block(u, v, pitch, r, c, heat2d::cells::all);
      std::swap(u, v);
    }
    seconds = MPI_Wtime() - start;
  }
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, cart);
  // The field on rank 0, in global order, for the checksum.
  std::vector<double> mine(r * c);
  for (std::size_t i = 0; i < r; ++i)
    std::copy_n(u + (i + 1) * pitch + 1, c, mine.begin() + static_cast<std::ptrdiff_t>(i * c));
  std::vector<int> counts(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  const int count = static_cast<int>(mine.size());
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, cart);
  for (std::size_t k = 1; k < counts.size(); ++k) offsets[k] = offsets[k - 1] + counts[k - 1];
  std::vector<double> blocks(me == 0 ? o.n * o.n : 0), field(blocks.size());
  MPI_Gatherv(mine.data(), count, MPI_DOUBLE, blocks.data(), counts.data(), offsets.data(),
              MPI_DOUBLE, 0, cart);
  if (me == 0) {
    for (int k = 0; k < size; ++k) {
      int kc[2];
      MPI_Cart_coords(cart, k, 2, kc);
      const block_range kr = block(o.n, rows, kc[0]), kcol = block(o.n, cols, kc[1]);
      for (std::size_t i = 0; i < kr.size(); ++i)
        std::copy_n(blocks.begin() + offsets[static_cast<std::size_t>(k)] +
                        static_cast<std::ptrdiff_t>(i * kcol.size()),
                    kcol.size(),
                    field.begin() + static_cast<std::ptrdiff_t>((kr.lo + i) * o.n + kcol.lo));
    }
    checksum = heat2d::checksum(field);
  }
  MPI_Bcast(&checksum, 1, MPI_DOUBLE, 0, cart);
  MPI_Type_free(&column);
  MPI_Comm_free(&cart);
  return seconds;
}

namespace {

/// The PRK transpose with MPI_Alltoallv; returns seconds per timed iteration.
double mpi_transpose(const transpose::options& o, double& abs_error) {
  int p = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const std::size_t n = o.order;
  const block_range mine = block(n, p, me);
  const std::size_t rows = mine.size();
  std::vector<double> a(rows * n), b(rows * n, 0.0);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < n; ++j) a[i * n + j] = static_cast<double>((mine.lo + i) * n + j);
  std::vector<int> counts(static_cast<std::size_t>(p)), offsets(static_cast<std::size_t>(p));
  for (int q = 0; q < p; ++q) {
    counts[static_cast<std::size_t>(q)] = static_cast<int>(rows * block(n, p, q).size());
    if (q)
      offsets[static_cast<std::size_t>(q)] =
          offsets[static_cast<std::size_t>(q) - 1] + counts[static_cast<std::size_t>(q) - 1];
  }
  std::vector<int> rcounts(counts.size()), roffsets(counts.size());
  for (int s = 0; s < p; ++s) {
    rcounts[static_cast<std::size_t>(s)] = static_cast<int>(block(n, p, s).size() * rows);
    if (s)
      roffsets[static_cast<std::size_t>(s)] =
          roffsets[static_cast<std::size_t>(s) - 1] + rcounts[static_cast<std::size_t>(s) - 1];
  }
  std::vector<double> send(rows * n), receive(rows * n);
  double start = 0;
  for (int it = 0; it < o.iterations; ++it) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (it == 1) start = MPI_Wtime();
    for (int q = 0; q < p; ++q) { // to q: A(my rows, q's rows)^T, rows(q) x rows
      const block_range bq = block(n, p, q);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < bq.size(); ++j)
          send[static_cast<std::size_t>(offsets[static_cast<std::size_t>(q)]) + j * rows + i] =
              a[i * n + bq.lo + j];
    }
    MPI_Alltoallv(send.data(), counts.data(), offsets.data(), MPI_DOUBLE, receive.data(),
                  rcounts.data(), roffsets.data(), MPI_DOUBLE, MPI_COMM_WORLD);
    for (int s = 0; s < p; ++s) { // from s: rows x rows(s), added into B(:, s's rows)
      const block_range bs = block(n, p, s);
      const double* in = receive.data() + roffsets[static_cast<std::size_t>(s)];
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < bs.size(); ++j) b[i * n + bs.lo + j] += in[i * bs.size() + j];
    }
    for (double& x : a) x += 1.0;
  }
  double seconds = o.iterations > 1 ? (MPI_Wtime() - start) / (o.iterations - 1) : 0;
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  abs_error = 0;
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < n; ++j)
      abs_error += std::abs(b[i * n + j] - transpose::expected(mine.lo + i, j, n, o.iterations));
  MPI_Allreduce(MPI_IN_PLACE, &abs_error, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return seconds;
}

/// shard(0) -> shard(1) of an n x n matrix with MPI_Alltoallv: rows are packed per
/// destination, and what arrives is already in place. Returns seconds.
double mpi_redistribute(std::size_t n) {
  int p = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const block_range rows = block(n, p, me), cols = block(n, p, me);
  std::vector<double> a(rows.size() * n, 1.0), send(a.size()), b(n * cols.size());
  std::vector<int> counts, offsets, rcounts, roffsets;
  int at = 0, rat = 0;
  for (int q = 0; q < p; ++q) {
    counts.push_back(static_cast<int>(rows.size() * block(n, p, q).size()));
    offsets.push_back(at);
    at += counts.back();
    rcounts.push_back(static_cast<int>(block(n, p, q).size() * cols.size()));
    roffsets.push_back(rat);
    rat += rcounts.back();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int q = 0; q < p; ++q) {
    const block_range bq = block(n, p, q);
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::copy_n(a.begin() + static_cast<std::ptrdiff_t>(i * n + bq.lo), bq.size(),
                  send.begin() + offsets[static_cast<std::size_t>(q)] +
                      static_cast<std::ptrdiff_t>(i * bq.size()));
  }
  MPI_Alltoallv(send.data(), counts.data(), offsets.data(), MPI_DOUBLE, b.data(), rcounts.data(),
                roffsets.data(), MPI_DOUBLE, MPI_COMM_WORLD);
  double seconds = MPI_Wtime() - start;
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return seconds;
}

} // namespace

void apps(const options& o) {
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (me == 0) print_header();
  const std::string group = "apps";

  heat2d::options h;
  h.n = o.smoke ? 256 : 2048;
  h.iterations = o.smoke ? 10 : 50;
  std::vector<double> crown_rate, mpi_rate;
  const double updates = static_cast<double>(h.n) * static_cast<double>(h.n) * h.iterations;
  for (int b = 0; b < o.batches; ++b) { // alternate, so both see the same machine
    const heat2d::result r = heat2d::solve(crown::world(), h, false);
    double checksum = 0;
    const double seconds = mpi_heat2d(h, checksum, false);
    if (checksum != r.checksum)
      throw crown::state_error("crown-bench apps", "heat2d checksums differ: Crown " +
                                                       std::to_string(r.checksum) + ", MPI " +
                                                       std::to_string(checksum));
    crown_rate.push_back(updates / r.seconds / 1e6);
    mpi_rate.push_back(updates / seconds / 1e6);
  }
  if (me == 0)
    print_line(group, "heat2d", h.n, "MLUP/s", median(crown_rate), "mpi_sendrecv",
               median(mpi_rate));

  // Redistribution, shard(0) -> shard(1): Crown's one-sided pulls against MPI_Alltoallv.
  const std::size_t order = o.smoke ? 256 : 2048;
  const double matrix = sizeof(double) * static_cast<double>(order) * order;
  const crown::mesh line = crown::world().reshape({{"x", crown::world().size()}});
  crown_rate.clear();
  mpi_rate.clear();
  for (int b = 0; b < o.batches; ++b) {
    crown::dist_tensor<double, 2> rows(line, {order, order}, {crown::shard(0)});
    rows.fill(1.0);
    crown::sync_all(line);
    double start = MPI_Wtime();
    const auto columns = rows.redistribute({crown::shard(1)});
    double seconds = MPI_Wtime() - start;
    crown::co_max(line, seconds);
    if (columns.sum() != static_cast<double>(order) * order)
      throw crown::state_error("crown-bench apps", "redistribute lost elements");
    crown_rate.push_back(matrix / seconds / 1e9);
    mpi_rate.push_back(matrix / mpi_redistribute(order) / 1e9);
  }
  if (me == 0)
    print_line(group, "redistribute", static_cast<std::size_t>(matrix), "GB/s", median(crown_rate),
               "mpi_alltoallv", median(mpi_rate));

  transpose::options t;
  t.order = o.smoke ? 256 : 2048;
  t.iterations = o.smoke ? 3 : 10;
  const double bytes = 2.0 * sizeof(double) * static_cast<double>(t.order) * t.order;
  crown_rate.clear();
  mpi_rate.clear();
  for (int b = 0; b < o.batches; ++b) {
    const transpose::result r = transpose::solve(crown::world(), t);
    double error = 0;
    const double seconds = mpi_transpose(t, error);
    if (r.abs_error > 1e-8 || error > 1e-8)
      throw crown::state_error("crown-bench apps", "transpose does not validate: error " +
                                                       std::to_string(r.abs_error) + " (Crown), " +
                                                       std::to_string(error) + " (MPI)");
    crown_rate.push_back(bytes / r.seconds / 1e6);
    mpi_rate.push_back(bytes / seconds / 1e6);
  }
  if (me == 0)
    print_line(group, "transpose", t.order, "MB/s", median(crown_rate), "mpi_alltoallv",
               median(mpi_rate));
}

} // namespace crown_bench
