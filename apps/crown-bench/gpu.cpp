// crown-bench gpu: device coarrays between two ranks of one host beside what one
// process reaches on its own GPU, and beside NVSHMEM (--nvshmem FILE: the output of
// crown-nvshmem-baseline, run just before by scripts/gpu-check). Rank 0 drives, rank 1
// is the target. Lines, in the order they run (issue 31's first: a step that runs out
// of time keeps the lines already printed):
//   put_bw/get_bw 4 KiB..256 MiB   Crown device put/get (device buffers) vs cudaMemcpyAsync
//                                  device to device into (out of) the same peer mapping + sync
//   put_latency/get_latency 8 B..4 KiB  host-initiated, vs cudaMemcpyAsync between host
//                                  memory and the same peer mapping + stream sync
//   kernel_store_latency 8 B       a kernel's store into the peer + sync vs a local store
//   kernel_flag_handoff 8 B        one way of a ping-pong between the two ranks' kernels
//                                  (a one-element put into the peer's flag, quiet, then
//                                  wait_until on its own) vs the same between two blocks
//                                  of one kernel; with --mps (scripts/gpu-check starts MPS)
//                                  only this line, named kernel_flag_handoff_mps: without
//                                  MPS the two processes' kernels take turns on the GPU, so
//                                  it measures time-slicing
//   kernel_put_bw_one_block        one block copying into the peer vs one block locally
//   heat2d (MLUP/s)                crown-heat2d --gpu's solver vs a plain CUDA+MPI version
//                                  (halos staged by hand) and vs the CPU solver, each
//                                  checksum bitwise the CPU's
//   co_sum_device 8 B..64 MiB      co_sum of a device coarray of doubles on the mesh's
//                                  path (printed first) vs the same bytes staged by hand:
//                                  cudaMemcpy to host, the host co_sum, cudaMemcpy back
//   co_broadcast_device, all_gather_device, reduce_scatter_device 4 KiB..16 MiB blocks
//                                  the same way, each vs the host collective staged by hand
//   dist_tensor_halo_rows/_columns  a 2-D device tensor's halo exchange (split in rows,
//                                  in columns) by the box copy kernel vs copies per plane
//                                  (CROWN_GPU_HALOS)
// With the two ranks on two hosts (CROWN_FAKE_HOSTS=2: the staged path), only:
//   staged_put_bw/staged_get_bw 64 KiB..256 MiB  Crown's staged device put/get vs the
//                                  same bytes staged by hand: cudaMemcpyAsync into
//                                  page-locked memory, MPI_Send/MPI_Recv, cudaMemcpyAsync
//                                  out, and an acknowledgement (a put's remote completion)
// Written without a GPU: compiled in CI, first run by scripts/gpu-check.
#include "../heat2d/gpu_solver.hpp"
#include "bench.hpp"
#include "gpu_kernels.hpp"
#include <crown/crown.hpp>
#include <map>

namespace crown_bench {
namespace {

using gpu_side::device_alloc;

/// NVSHMEM seconds per operation, by "op,bytes".
std::map<std::string, double> g_nvshmem;

void read_nvshmem(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "r");
  if (!f) throw crown::argument_error("crown-bench --nvshmem " + file, "cannot open the file");
  char op[64], buffer[256];
  unsigned long long bytes = 0;
  double seconds = 0;
  while (std::fgets(buffer, sizeof buffer, f))
    if (std::sscanf(buffer, "nvshmem,%63[^,],%llu,%lf", op, &bytes, &seconds) == 3)
      g_nvshmem[std::string(op) + "," + std::to_string(bytes)] = seconds;
  std::fclose(f);
}

/// A figure beside its baseline, and beside NVSHMEM's when it measured the same.
void line(const char* op, std::size_t bytes, const char* unit, double crown_value, const char* base,
          double base_value) {
  print_line("gpu", op, bytes, unit, crown_value, base, base_value);
  const auto n = g_nvshmem.find(std::string(op) + "," + std::to_string(bytes));
  if (n == g_nvshmem.end()) return;
  const bool latency = std::strcmp(unit, "us") == 0;
  print_line("gpu", op, bytes, unit, crown_value, "nvshmem",
             latency ? n->second * 1e6 : static_cast<double>(bytes) / n->second / 1e9);
}

struct device_buffer {
  void* p;
  explicit device_buffer(std::size_t bytes) : p(device_alloc(bytes)) {}
  ~device_buffer() { gpu_side::device_free(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

/// Rank 1 on another host: Crown's staged transfers against staging by hand, each a
/// blocking transfer of `b` bytes between rank 0's device buffer and rank 1's block.
void staged_figures(const options& o, const crown::mesh& w, std::uint64_t at, void* src, void* dst,
                    std::size_t max_bytes, CUstream_st* stream) {
  const int me = w.rank();
  const auto& t = crown::this_runtime().transports();
  if (me == 0)
    std::printf("# device memory off-host: %s (%s)\n", t.device_offhost.c_str(),
                t.device_offhost_why.c_str());
  void* pinned = gpu_side::pinned_alloc(max_bytes);
  void* block = crown::detail::device_address(at); // rank 1's end of the hand-staged copy
  MPI_Comm comm = MPI_COMM_NULL;
  crown::check_mpi(MPI_Comm_dup(w.comm(), &comm), "MPI_Comm_dup(staged baseline)");
  const auto by_hand = [&](bool put, std::size_t b) {
    const int n = static_cast<int>(b);
    if (put && me == 0) {
      gpu_side::memcpy_async_sync(pinned, src, b, stream);
      MPI_Send(pinned, n, MPI_BYTE, 1, 0, comm);
      MPI_Recv(nullptr, 0, MPI_BYTE, 1, 1, comm, MPI_STATUS_IGNORE);
    } else if (put) {
      MPI_Recv(pinned, n, MPI_BYTE, 0, 0, comm, MPI_STATUS_IGNORE);
      gpu_side::memcpy_async_sync(block, pinned, b, stream);
      MPI_Send(nullptr, 0, MPI_BYTE, 0, 1, comm);
    } else if (me == 0) {
      MPI_Send(nullptr, 0, MPI_BYTE, 1, 2, comm);
      MPI_Recv(pinned, n, MPI_BYTE, 1, 3, comm, MPI_STATUS_IGNORE);
      gpu_side::memcpy_async_sync(dst, pinned, b, stream);
    } else {
      MPI_Recv(nullptr, 0, MPI_BYTE, 0, 2, comm, MPI_STATUS_IGNORE);
      gpu_side::memcpy_async_sync(pinned, block, b, stream);
      MPI_Send(pinned, n, MPI_BYTE, 0, 3, comm);
    }
  };
  for (const bool put : {true, false})
    for (std::size_t b = std::size_t{64} << 10; b <= max_bytes; b *= (o.smoke ? 16 : 4)) {
      const int ops = std::max(4, ops_for(b, o.smoke) / 4);
      double c = 0;
      if (me == 0)
        c = median_seconds(o, ops, [&] {
          if (put)
            crown::detail::device_put(1, at, src, b);
          else
            crown::detail::device_get(1, at, dst, b);
        });
      crown::sync_all(); // rank 1 serves the requests while it waits here
      const double h = median_seconds(o, ops, [&] { by_hand(put, b); });
      if (me == 0)
        line(put ? "staged_put_bw" : "staged_get_bw", b, "GB/s", b / c / 1e9, "memcpy_mpi_by_hand",
             b / h / 1e9);
    }
  MPI_Comm_free(&comm);
  gpu_side::pinned_free(pinned);
}

/// One way of a kernel-to-kernel flag ping-pong between the two ranks (rank 0 prints):
/// medians of batches of as many round trips as take about 20 ms (calibrated on 8 after
/// a launch that loads the kernels; one count for both ranks), each halved, beside two
/// blocks of one kernel on rank 0 doing the same (calibrated on its own). A batch that
/// does not finish within 2 s is released and reported, and the measurement stops after
/// about 4 s (the bench step has 60 s for everything): without MPS a hop takes a time
/// slice.
void flag_handoff(const options& o, const crown::mesh& w, bool mps, CUstream_st* stream) {
  const int me = w.rank();
  crown::coarray<std::int64_t, 1, crown::memory_kind::cuda> flags(w, 1); // zeroed
  const auto v = flags.device();
  device_buffer local(2 * sizeof(std::int64_t));
  const std::int64_t zero[2] = {0, 0};
  gpu_side::memcpy_async_sync(local.p, zero, sizeof zero, stream);
  auto* const local_flags = static_cast<std::int64_t*>(local.p);
  constexpr double deadline = 2, cap = 4; // seconds: per batch, in all
  std::int64_t crossed = 0, beside = 0;   // rounds done so far: the flags' values
  int late = 0;                           // a batch was released (rank 0 knows)
  const auto per_round = [](double seconds, int rounds) { return seconds / std::max(rounds, 1); };
  const auto cross = [&](int rounds) { // seconds per round trip (rank 0's clock)
    MPI_Barrier(w.comm());
    const double start = MPI_Wtime();
    gpu_side::start_flag_ping_pong(v, me, crossed, rounds, stream);
    int released = !gpu_side::finish_or_release(stream, flags.data(), 1, deadline);
    const double seconds = MPI_Wtime() - start;
    crossed += rounds;
    MPI_Allreduce(MPI_IN_PLACE, &released, 1, MPI_INT, MPI_LOR, w.comm());
    late |= released;
    return per_round(seconds, rounds);
  };
  const auto alone = [&](int rounds) { // rank 0 only
    const double start = MPI_Wtime();
    gpu_side::start_flag_ping_pong_local(local_flags, beside, rounds, stream);
    late |= !gpu_side::finish_or_release(stream, local_flags, 2, deadline);
    beside += rounds;
    return per_round(MPI_Wtime() - start, rounds);
  };
  const auto rounds_for = [](double seconds_per_round) {
    return std::clamp(static_cast<int>(0.02 / seconds_per_round), 8, 20000);
  };
  const double began = MPI_Wtime();
  cross(0); // loads the kernel in both processes: not while the other one spins
  int setup[3] = {rounds_for(cross(8)), 8, 0}; // rounds across, in one process; stop
  if (me == 0) {
    alone(0);
    setup[1] = rounds_for(alone(8));
    setup[2] = late; // the calibration's releases: only rank 0 knows of its own
  }
  MPI_Bcast(setup, 3, MPI_INT, 0, w.comm());
  std::vector<double> crown_t, base_t;
  for (int stop = setup[2]; !stop;) {
    crown_t.push_back(cross(setup[0]) / 2);
    if (me == 0 && !late) base_t.push_back(alone(setup[1]) / 2);
    stop = late || static_cast<int>(crown_t.size()) == o.batches || MPI_Wtime() - began > cap;
    MPI_Bcast(&stop, 1, MPI_INT, 0, w.comm());
  }
  if (me != 0) return;
  std::printf("# kernel flag hand-off: %s; %zu batches of %d (%d in one process) round trips%s\n",
              mps ? "under MPS (scripts/gpu-check started it)" : "without MPS (time-slicing)",
              crown_t.size(), setup[0], setup[1],
              late ? "; a batch was RELEASED after 2 s: no figure" : "");
  if (!late)
    line(mps ? "kernel_flag_handoff_mps" : "kernel_flag_handoff", 8, "us", median(crown_t) * 1e6,
         "same_process_flag", median(base_t) * 1e6);
}

/// dist_tensor's halo exchange on the GPU by the box copy kernel against copies per
/// plane (CROWN_GPU_HALOS: the default is whichever wins here), alternating batch by
/// batch: an n x n tensor of doubles split in rows (its halos are rows: one run each)
/// and in columns (one element per row), halos of width 1 across the split only,
/// periodic. The line's size is n; no line when the kernel never ran.
void halo_paths(const options& o, const crown::mesh& w) {
  const std::size_t n = o.smoke ? 1024 : 4096;
  struct restore { // the setting as it was, also after an error
    crown::gpu_halos_choice was = crown::detail::device_halos();
    ~restore() { crown::detail::set_device_halos(was); }
  } restore;
  if (w.rank() == 0)
    std::printf("# dist_tensor halos: the box copy kernel (crown) vs copies per plane "
                "(baseline); ratio > 1: the kernel is faster\n");
  for (const std::size_t split : {0, 1}) {
    crown::halo_spec<2> halo{{0, 0}, {false, false}};
    halo.width[split] = 1;
    halo.periodic[split] = true;
    crown::dist_tensor<double, 2, crown::memory_kind::cuda> t(w, {n, n}, {crown::shard(split)},
                                                              halo);
    const auto exchange = [&](crown::gpu_halos_choice how) {
      return [&t, how] {
        crown::detail::set_device_halos(how);
        t.exchange_halos();
      };
    };
    const std::uint64_t launched = crown::detail::device_box_kernel_launches();
    const auto m = medians_alternating(
        o, o.smoke ? 20 : 200,
        {exchange(crown::gpu_halos_choice::kernel), exchange(crown::gpu_halos_choice::copies)});
    if (w.rank() != 0) continue;
    const char* op = split == 0 ? "dist_tensor_halo_rows" : "dist_tensor_halo_columns";
    if (crown::detail::device_box_kernel_launches() == launched)
      std::printf("# %s: the box copy kernel never ran (its boxes went by copies): no line\n", op);
    else
      line(op, n, "us", m[0] * 1e6, "copies_per_plane", m[1] * 1e6);
  }
}

} // namespace

void gpu(const options& o) {
  if (!o.nvshmem_file.empty()) read_nvshmem(o.nvshmem_file);
  const auto& w = crown::world();
  if (w.size() != 2) throw crown::argument_error("crown-bench gpu", "run it on exactly 2 ranks");
  const int me = w.rank();
  CUstream_st* stream = gpu_side::stream_create();
  if (me == 0) print_header();
  if (o.mps) { // a kernel view reaches images of its own host only
    if (std::string_view(crown::device_link(1 - me)) != "mapped")
      throw crown::argument_error("crown-bench gpu --mps",
                                  "the two ranks' device heaps must map each other (link: " +
                                      std::string(crown::device_link(1 - me)) + ")");
    flag_handoff(o, w, true, stream);
    return gpu_side::stream_destroy(stream);
  }
  const std::size_t max_bytes = o.smoke ? (std::size_t{4} << 20) : (std::size_t{256} << 20);
  crown::coarray<char, 1, crown::memory_kind::cuda> a(w, max_bytes);
  device_buffer src(max_bytes), dst(max_bytes);
  const std::uint64_t at = a.block().offset;
  if (std::string_view(crown::device_link(1 - me)) == "staged") {
    staged_figures(o, w, at, src.p, dst.p, max_bytes, stream);
    return gpu_side::stream_destroy(stream);
  }
  // Rank 1's block as mapped here: where the baselines copy to and from.
  void* const peer = crown::detail::device_peer_address(1 - me, at);
  const auto run = [&](const std::function<void()>& body) {
    if (me == 0) body();
    MPI_Barrier(w.comm()); // the target has nothing to do: copies need no progress there
  };

  for (const bool put : {true, false})
    for (std::size_t b = 4096; b <= max_bytes; b *= (o.smoke ? 32 : 4))
      run([&] {
        const int ops = std::max(4, ops_for(b, o.smoke) / 4);
        const double c = median_seconds(o, ops, [&] {
          if (put)
            crown::detail::device_put(1, at, src.p, b);
          else
            crown::detail::device_get(1, at, dst.p, b);
        });
        const double m = median_seconds(o, ops, [&] {
          if (put)
            gpu_side::memcpy_async_sync(peer, src.p, b, stream);
          else
            gpu_side::memcpy_async_sync(dst.p, peer, b, stream);
        });
        line(put ? "put_bw" : "get_bw", b, "GB/s", b / c / 1e9, "cudaMemcpyAsync_peer",
             b / m / 1e9);
      });

  std::vector<char> host(4096, 1);
  for (const bool put : {true, false})
    for (const std::size_t b : {8, 64, 512, 4096})
      run([&] {
        const int ops = o.smoke ? 50 : 2000;
        const double c = median_seconds(o, ops, [&] {
          if (put)
            crown::detail::device_put(1, at, host.data(), b);
          else
            crown::detail::device_get(1, at, host.data(), b);
        });
        const double m = median_seconds(o, ops, [&] {
          if (put)
            gpu_side::memcpy_async_sync(peer, host.data(), b, stream);
          else
            gpu_side::memcpy_async_sync(host.data(), peer, b, stream);
        });
        line(put ? "put_latency" : "get_latency", b, "us", c * 1e6, "cudaMemcpyAsync_sync",
             m * 1e6);
      });

  { // kernels through the view (issue 31's figures: first, before the step's time may run out)
    const std::size_t n = max_bytes / sizeof(double);
    crown::coarray<double, 1, crown::memory_kind::cuda> d(w, n);
    const auto v = d.device();
    run([&] {
      const int ops = o.smoke ? 50 : 2000;
      const double c = median_seconds(o, ops, [&] { gpu_side::kernel_store_peer(v, 1); });
      const double l = median_seconds(
          o, ops, [&] { gpu_side::kernel_store_local(static_cast<double*>(dst.p)); });
      line("kernel_store_latency", 8, "us", c * 1e6, "local_store_kernel", l * 1e6);
    });
    flag_handoff(o, w, false, stream);
    const std::size_t block_bytes = o.smoke ? (std::size_t{4} << 20) : (std::size_t{64} << 20);
    run([&] {
      const int ops = o.smoke ? 3 : 10;
      const std::size_t count = block_bytes / sizeof(double);
      const double c = median_seconds(o, ops, [&] { gpu_side::kernel_put_one_block(v, 1, count); });
      const double l = median_seconds(o, ops, [&] {
        gpu_side::kernel_copy_one_block(static_cast<double*>(dst.p),
                                        static_cast<const double*>(src.p), count);
      });
      line("kernel_put_bw_one_block", block_bytes, "GB/s", block_bytes / c / 1e9,
           "local_copy_one_block", block_bytes / l / 1e9);
    });
  }

  { // heat2d on 2 ranks: Crown's device puts against staging by hand, and the CPU
    heat2d::options h;
    h.n = o.smoke ? 512 : 2048; // the CPU run bounds the time: the bench step has 60 s
    h.iterations = o.smoke ? 10 : 50;
    const double updates = static_cast<double>(h.n) * static_cast<double>(h.n) * h.iterations;
    std::vector<double> crown_rate, cuda_mpi_rate, cpu_rate;
    for (int b = 0; b < o.batches; ++b) {
      const heat2d::result g = heat2d::solve_gpu(w, h, false);
      double checksum = 0;
      const double seconds = mpi_heat2d(h, checksum, true);
      const heat2d::result c = heat2d::solve(w, h, false);
      if (g.checksum != c.checksum || checksum != c.checksum)
        throw crown::state_error("crown-bench gpu", "heat2d checksums differ: --gpu " +
                                                        std::to_string(g.checksum) + ", CUDA+MPI " +
                                                        std::to_string(checksum) + ", CPU " +
                                                        std::to_string(c.checksum));
      crown_rate.push_back(updates / g.seconds / 1e6);
      cuda_mpi_rate.push_back(updates / seconds / 1e6);
      cpu_rate.push_back(updates / c.seconds / 1e6);
    }
    if (me == 0) {
      line("heat2d", h.n, "MLUP/s", median(crown_rate), "cuda_mpi_staged", median(cuda_mpi_rate));
      line("heat2d", h.n, "MLUP/s", median(crown_rate), "cpu_crown", median(cpu_rate));
    }
  }

  {
    std::string why;
    const crown::device_path path = crown::device_collectives_path(w, &why);
    if (me == 0)
      std::printf("# device collectives: %s (%s)\n", std::string(crown::to_string(path)).c_str(),
                  why.c_str());
    const std::size_t top = o.smoke ? (std::size_t{1} << 20) : (std::size_t{64} << 20);
    std::vector<double> staged(top / sizeof(double));
    for (std::size_t b = 8; b <= top; b *= (o.smoke ? 64 : 8)) {
      crown::coarray<double, 1, crown::memory_kind::cuda> x(w, b / sizeof(double));
      const int ops = std::max(4, ops_for(b, o.smoke) / 8);
      const double c = median_seconds(o, ops, [&] { crown::co_sum(x); });
      const double h = median_seconds(o, ops, [&] {
        gpu_side::memcpy_async_sync(staged.data(), x.data(), b, stream);
        crown::co_sum(w, std::span<double>(staged.data(), x.size()));
        gpu_side::memcpy_async_sync(x.data(), staged.data(), b, stream);
      });
      if (me == 0) line("co_sum_device", b, "us", c * 1e6, "staged_host_co_sum", h * 1e6);
    }
    // The broadcast and the block collectives, each beside the same staged by hand: a
    // block of `b` bytes (images pieces of b / images for reduce_scatter).
    for (std::size_t b = 4096; b <= top; b *= (o.smoke ? 256 : 64)) {
      const std::size_t count = b / sizeof(double), piece = count / 2;
      crown::coarray<double, 1, crown::memory_kind::cuda> x(w, count);
      device_buffer all(2 * b);
      auto* const all_d = static_cast<double*>(all.p);
      std::vector<double> host_all(2 * count);
      const int ops = std::max(4, ops_for(b, o.smoke) / 8);
      const auto to_host = [&] { gpu_side::memcpy_async_sync(staged.data(), x.data(), b, stream); };
      const auto figure = [&](const char* op, const char* base, const std::function<void()>& crown,
                              const std::function<void()>& by_hand) {
        const double c = median_seconds(o, ops, crown), h = median_seconds(o, ops, by_hand);
        if (me == 0) line(op, b, "us", c * 1e6, base, h * 1e6);
      };
      figure(
          "co_broadcast_device", "staged_host_co_broadcast", [&] { crown::co_broadcast(x, 0); },
          [&] {
            to_host();
            crown::co_broadcast(w, std::span<double>(staged.data(), count), 0);
            gpu_side::memcpy_async_sync(x.data(), staged.data(), b, stream);
          });
      figure(
          "all_gather_device", "staged_host_all_gather",
          [&] { crown::all_gather(x, std::span<double>(all_d, 2 * count)); },
          [&] {
            to_host();
            crown::all_gather(w, std::span<const double>(staged.data(), count),
                              std::span<double>(host_all));
            gpu_side::memcpy_async_sync(all_d, host_all.data(), 2 * b, stream);
          });
      figure(
          "reduce_scatter_device", "staged_host_reduce_scatter",
          [&] { crown::reduce_scatter(x, std::span<double>(all_d, piece)); },
          [&] {
            to_host();
            crown::reduce_scatter(w, std::span<const double>(staged.data(), count),
                                  std::span<double>(host_all.data(), piece));
            gpu_side::memcpy_async_sync(all_d, host_all.data(), piece * sizeof(double), stream);
          });
    }
  }

  halo_paths(o, w);
  gpu_side::stream_destroy(stream);
}

} // namespace crown_bench
