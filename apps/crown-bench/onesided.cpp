// crown-bench onesided: puts, gets, strided sections, atomics, co_sum, all_gather and
// reduce_scatter beside raw MPI,
// OpenSHMEM (--shmem) and memcpy into a shared mapping. Rank 0 drives, rank 1 is the
// target (one direction). The group column names the path to rank 1: "onesided"
// (load/store) or "onesided-<transport>".
#include "bench.hpp"
#include <atomic>
#include <crown/crown.hpp>
#include <crown/detail/copy.hpp>
#include <crown/trace.hpp>
#include <map>
#include <sched.h>
#include <thread>

namespace crown_bench {
namespace {

/// OpenSHMEM seconds per operation, by "op,bytes".
std::map<std::string, double> g_shmem;
std::string g_group = "onesided";

void read_shmem(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "r");
  if (!f) throw crown::argument_error("crown-bench --shmem " + file, "cannot open the file");
  char op[64];
  unsigned long long bytes = 0;
  double seconds = 0;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, f))
    if (std::sscanf(buffer, "shmem,%63[^,],%llu,%lf", op, &bytes, &seconds) == 3)
      g_shmem[std::string(op) + "," + std::to_string(bytes)] = seconds;
  std::fclose(f);
}

/// One figure beside its baseline; and beside OpenSHMEM's when it measured the same.
void line(const char* op, std::size_t bytes, const char* unit, double crown, const char* base,
          double base_value) {
  print_line(g_group, op, bytes, unit, crown, base, base_value);
  const auto shmem = g_shmem.find(std::string(op) + "," + std::to_string(bytes));
  if (shmem == g_shmem.end() || std::strncmp(base, "memcpy", 6) == 0) return;
  const bool latency = std::strcmp(unit, "us") == 0;
  const double value =
      latency ? shmem->second * 1e6 : static_cast<double>(bytes) / shmem->second / 1e9;
  print_line(g_group, op, bytes, unit, crown, "openshmem", value);
}

/// The two ranks' cache-line round trip through rank 1's segment of `shared` (a word
/// written by one, answered in another line by the other), the median of 21 batches as
/// rank 0 times them: the floor under every small one-sided and co_* figure. On this
/// project's 2-vCPU VM it read 110-120 ns or 490-530 ns, switching between runs as the
/// host moved the vCPUs, and the small figures moved with it. Collective.
double line_round_trip(MPI_Win shared, MPI_Comm comm, int me, bool smoke) {
  MPI_Aint size = 0;
  int disp = 0;
  char* base = nullptr;
  MPI_Win_shared_query(shared, 1, &size, &disp, &base);
  const auto at = (reinterpret_cast<std::uintptr_t>(base) + 63) / 64 * 64;
  std::atomic_ref<long> ping(*reinterpret_cast<long*>(at));
  std::atomic_ref<long> pong(*reinterpret_cast<long*>(at + 64));
  if (me == 1) {
    ping.store(0);
    pong.store(0);
  }
  MPI_Barrier(comm);
  const int batches = 21, trips = smoke ? 100 : 2000;
  std::vector<double> ns;
  // Yields after a while: should both ranks share a CPU after all, a trip costs a time
  // slice only once in so many polls instead of every time.
  const auto await = [](std::atomic_ref<long> word, long value) {
    for (long polls = 1; word.load(std::memory_order_acquire) != value; ++polls)
      if (polls % 4096 == 0) std::this_thread::yield();
  };
  for (long i = 0, b = 0; b < batches; ++b) {
    const double start = MPI_Wtime();
    for (int k = 0; k < trips; ++k) {
      ++i;
      if (me == 0) {
        ping.store(i, std::memory_order_release);
        await(pong, i);
      } else {
        await(ping, i);
        pong.store(i, std::memory_order_release);
      }
    }
    ns.push_back((MPI_Wtime() - start) / trips * 1e9);
  }
  std::sort(ns.begin(), ns.end());
  return ns[batches / 2];
}

} // namespace

void onesided(const options& o) {
  if (!o.shmem_file.empty()) read_shmem(o.shmem_file);
  const auto& w = crown::world();
  if (w.size() != 2)
    throw crown::argument_error("crown-bench onesided", "run it on exactly 2 ranks");
  const int me = w.rank();
  const std::size_t max_bytes = o.smoke ? (std::size_t{1} << 20) : (std::size_t{64} << 20);
  MPI_Comm comm = w.comm();

  crown::coarray<char> a(w, max_bytes);
  // Partial-block transfers go through the same calls coarray::put/get make.
  // Each way puts from and gets into buffers of its own. Sharing a destination with the
  // baselines, Crown's 4 KiB get read 141-145 ns in two runs, 62-119 ns with its own,
  // and MPI's 4 KiB get_bw rose from 43 to 67 GB/s with its own: whatever state one copy
  // leaves in the lines or pages (not found), no figure inherits another's.
  std::vector<char> src(max_bytes, 1), dst(max_bytes), mpi_src(src), mpi_dst(max_bytes),
      memcpy_src(src), memcpy_dst(max_bytes);

  // Baselines: raw MPI RMA on an MPI_Win_allocate window; memcpy into a shared mapping
  // the other process owns (MPI_Win_allocate_shared), the physical limit on one host.
  char* raw = nullptr;
  MPI_Win raw_win;
  MPI_Win_allocate(static_cast<MPI_Aint>(max_bytes), 1, MPI_INFO_NULL, comm, &raw, &raw_win);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, raw_win);
  // The shared mapping exists only when both ranks share a host; across hosts the
  // memcpy lines are left out.
  MPI_Comm host = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int host_size = 0;
  MPI_Comm_size(host, &host_size);
  const bool one_host = host_size == 2;
  char* shared_mine = nullptr;
  MPI_Win shared_win = MPI_WIN_NULL;
  char* shared_peer = nullptr;
  if (one_host) {
    MPI_Win_allocate_shared(static_cast<MPI_Aint>(max_bytes + 4096), 1, MPI_INFO_NULL, host,
                            &shared_mine, &shared_win);
    MPI_Aint shared_size;
    int disp;
    MPI_Win_shared_query(shared_win, 1, &shared_size, &disp, &shared_peer);
    // At the page offset of Crown's block, so that both copies see the same alignment
    // of source and destination (Open MPI's segment starts 264 bytes into a page, Crown's
    // blocks on one): memcpy's speed at 4-16 KiB differs by up to 1.5x between the two.
    const auto page_offset = [](const void* p) {
      return reinterpret_cast<std::uintptr_t>(p) % 4096;
    };
    shared_peer += (page_offset(a.data()) + 4096 - page_offset(shared_peer)) % 4096;
  }

  if (const char* t = crown::detail::transport_name(1)) g_group = std::string("onesided-") + t;
  if (me == 0) print_header();
  // Where the two ranks may run on two CPUs or more between them (ranks on one CPU would
  // take turns in time slices): the round trip now and at the end (docs/benchmarks.md).
  // mpirun binds each rank to a core of its own, so it is the union of both masks.
  cpu_set_t allowed, peer_allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof allowed, &allowed);
  MPI_Sendrecv(&allowed, sizeof allowed, MPI_BYTE, 1 - me, 0, &peer_allowed, sizeof peer_allowed,
               MPI_BYTE, 1 - me, 0, comm, MPI_STATUS_IGNORE);
  CPU_OR(&allowed, &allowed, &peer_allowed);
  const bool own_cpus = one_host && CPU_COUNT(&allowed) >= 2;
  const auto round_trip = [&](const char* when) {
    if (!own_cpus) return;
    const double ns = line_round_trip(shared_win, comm, me, o.smoke);
    if (me == 0) std::printf("# cache-line round trip between the ranks %s: %.0f ns\n", when, ns);
  };
  round_trip("at the start");
  if (me == 0)
    std::printf("# copy_bytes: skewed copies go in 2 KiB pieces below %zu bytes (probed)\n",
                crown::detail::pieces_below());
  const auto run = [&](const std::function<void()>& body) {
    if (me == 0) body();
    w.barrier(); // the target progresses here while rank 0 measures
  };
  // One direction's three ways to move `b` bytes to or from rank 1: Crown, raw MPI RMA,
  // and memcpy through the shared mapping.
  // Where in its own buffers each way's latency round moves its bytes (`local` pages on).
  std::size_t local = 0;
  const auto crown_op = [&](bool put, std::size_t b) {
    if (put)
      crown::detail::remote_put(1, a.block().offset, src.data() + local, b);
    else
      crown::detail::remote_get(1, a.block().offset, dst.data() + local, b);
  };
  const auto mpi_op = [&](bool put, std::size_t b) {
    const int n = static_cast<int>(b);
    if (put)
      MPI_Put(mpi_src.data() + local, n, MPI_BYTE, 1, 0, n, MPI_BYTE, raw_win);
    else
      MPI_Get(mpi_dst.data() + local, n, MPI_BYTE, 1, 0, n, MPI_BYTE, raw_win);
    MPI_Win_flush(1, raw_win);
  };
  const auto memcpy_op = [&](bool put, std::size_t b) {
    if (put)
      std::memcpy(shared_peer, memcpy_src.data(), b);
    else
      std::memcpy(memcpy_dst.data(), shared_peer, b);
  };
  // memcpy between the very pages Crown's copy uses: its own buffers and rank 1's block,
  // mapped here. A memcpy alone into one 64 MiB mapping against another ran 0.6-1.5x
  // apart from process to process on this VM (docs/benchmarks.md), so only this copy is
  // the limit of Crown's; the other pages' memcpy stays beside it.
  auto* crown_peer = reinterpret_cast<char*>(crown::detail::heap_peer_address(1, a.block().offset));
  const auto same_pages_op = [&](bool put, std::size_t b) {
    if (put)
      std::memcpy(crown_peer, src.data(), b);
    else
      std::memcpy(dst.data(), crown_peer, b);
  };
  for (const bool put : {true, false})
    for (const std::size_t b : {8, 64, 512, 4096})
      run([&] {
        const int ops = o.smoke ? 200 : 20000;
        // Each round on other local pages (64 KiB on, the same offset in a page): in some
        // processes every 4 KiB get into one buffer read 104-152 ns and into another 52-75,
        // on this VM, whichever way's it was; a figure is then one draw of pages.
        const auto t = medians_alternating(
            o, ops, {[&] { crown_op(put, b); }, [&] { mpi_op(put, b); }},
            [&](int round) { local = static_cast<std::size_t>(round % 8) * 65536; });
        local = 0;
        const double c = t[0], m = t[1];
        line(put ? "put_latency" : "get_latency", b, "us", c * 1e6,
             put ? "mpi_put_flush" : "mpi_get_flush", m * 1e6);
      });
  // CROWN_TRACE's cost on the 8 B put (docs/benchmarks.md): remote_put, whose trace span
  // is one predicted branch while tracing is off, against remote_put_untraced (the same
  // inline transfer without the span), in alternating batches, 51 of them: 1% of the
  // figure is well under a nanosecond. Then recording on against off (each call sets
  // the flag, so both pay the same store).
  run([&] {
    options more = o;
    more.batches = std::max(o.batches, 51);
    const int ops = o.smoke ? 200 : 20000;
    const std::uint64_t at = a.block().offset;
    const bool was_on = crown::detail::trace_on();
    crown::detail::set_trace_enabled(false);
    // The baseline twice: how far two identical loops land apart is the resolution.
    const auto off =
        medians_alternating(more, ops,
                            {[&] { crown::detail::remote_put(1, at, src.data(), 8); },
                             [&] { crown::detail::remote_put_untraced(1, at, src.data(), 8); },
                             [&] { crown::detail::remote_put_untraced(1, at, src.data(), 8); }});
    line("put_latency_trace_off", 8, "us", off[0] * 1e6, "put_without_trace_span", off[1] * 1e6);
    std::printf("# trace hook: the same baseline timed twice: %.3fx\n", off[1] / off[2]);
    if (CROWN_TRACE_COMPILED) {
      const auto on = medians_alternating(o, ops,
                                          {[&] {
                                             crown::detail::set_trace_enabled(true);
                                             crown::detail::remote_put(1, at, src.data(), 8);
                                           },
                                           [&] {
                                             crown::detail::set_trace_enabled(false);
                                             crown::detail::remote_put(1, at, src.data(), 8);
                                           }});
      line("put_latency_trace_on", 8, "us", on[0] * 1e6, "put_trace_off", on[1] * 1e6);
    }
    crown::detail::set_trace_enabled(was_on);
  });
  for (const bool put : {true, false})
    for (std::size_t b = 4096; b <= max_bytes; b *= (o.smoke ? 16 : 4))
      run([&] {
        const int ops = ops_for(b, o.smoke);
        const char* op = put ? "put_bw" : "get_bw";
        // The memcpy baselines exist only on one host (timed as no-ops elsewhere).
        const auto t = medians_alternating(o, ops,
                                           {[&] { crown_op(put, b); }, [&] { mpi_op(put, b); },
                                            [&] {
                                              if (one_host) memcpy_op(put, b);
                                            },
                                            [&] {
                                              if (crown_peer) same_pages_op(put, b);
                                            }});
        const double c = t[0], m = t[1];
        if (one_host) line(op, b, "GB/s", b / c / 1e9, "memcpy_shared", b / t[2] / 1e9);
        if (crown_peer) line(op, b, "GB/s", b / c / 1e9, "memcpy_same_pages", b / t[3] / 1e9);
        line(op, b, "GB/s", b / c / 1e9, put ? "mpi_put_flush" : "mpi_get_flush", b / m / 1e9);
      });

  // Strided section: every other column of a rows x 1024 double matrix.
  {
    const std::size_t rows = o.smoke ? 64 : 1024, cols = 1024;
    crown::coarray<double, 2> m(w, {rows, cols});
    std::vector<double> packed(rows * cols / 2, 2.0);
    const crown::section<2> s{{{0, rows, 1}, {0, cols, 2}}};
    MPI_Datatype column_pairs;
    MPI_Type_vector(static_cast<int>(rows * cols / 2), 1, 2, MPI_DOUBLE, &column_pairs);
    MPI_Type_commit(&column_pairs);
    run([&] {
      const int ops = o.smoke ? 5 : 50;
      const auto t = medians_alternating(o, ops,
                                         {[&] { m.on(1).put(s, packed); },
                                          [&] {
                                            MPI_Put(packed.data(), static_cast<int>(packed.size()),
                                                    MPI_DOUBLE, 1, 0, 1, column_pairs, raw_win);
                                            MPI_Win_flush(1, raw_win);
                                          }});
      const double c = t[0], v = t[1];
      const std::size_t bytes = packed.size() * sizeof(double);
      line("strided_put_bw", bytes, "GB/s", bytes / c / 1e9, "mpi_put_vector", bytes / v / 1e9);
    });
    MPI_Type_free(&column_pairs);
  }

  // Small section: a 4 x 4 tile of a 64 x 64 double matrix, the size of a halo corner,
  // where the cost of a call (checks, layout) shows beside the 128 bytes moved.
  {
    crown::coarray<double, 2> m(w, {64, 64});
    std::vector<double> tile(16);
    const crown::section<2> s{{{8, 12, 1}, {8, 12, 1}}};
    MPI_Datatype rows;
    MPI_Type_vector(4, 4, 64, MPI_DOUBLE, &rows);
    MPI_Type_commit(&rows);
    run([&] {
      const int ops = o.smoke ? 200 : 20000;
      const auto t = medians_alternating(o, ops,
                                         {[&] { m.on(1).get(s, std::span<double>(tile)); },
                                          [&] {
                                            MPI_Get(tile.data(), 16, MPI_DOUBLE, 1,
                                                    (8 * 64 + 8) * 8, 1, rows, raw_win);
                                            MPI_Win_flush(1, raw_win);
                                          }});
      const double c = t[0], v = t[1];
      line("section_get_latency", 128, "us", c * 1e6, "mpi_get_vector", v * 1e6);
    });
    MPI_Type_free(&rows);
  }

  // Atomic fetch-and-add on the target's word.
  {
    crown::coarray<std::int64_t> counter(w, 1);
    run([&] {
      const int ops = o.smoke ? 200 : 20000;
      std::int64_t one = 1, old = 0;
      const auto t =
          medians_alternating(o, ops,
                              {[&] { (void)counter.on(1).fetch_add({0}, 1); },
                               [&] {
                                 MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 1, 0, MPI_SUM, raw_win);
                                 MPI_Win_flush(1, raw_win);
                               }});
      const double c = t[0], m = t[1];
      line("fetch_add_latency", 8, "us", c * 1e6, "mpi_fetch_and_op", m * 1e6);
    });
  }

  // co_sum of doubles against MPI_Allreduce (both ranks take part): data in the heap
  // (reduced in place) and in ordinary memory (through Crown's heap buffers).
  std::vector<std::size_t> sums;
  for (std::size_t b = 8; b < max_bytes; b *= (o.smoke ? 64 : 8)) sums.push_back(b);
  sums.push_back(max_bytes); // 8 B .. 64 MiB (1 MiB with --smoke)
  for (std::size_t b : sums) {
    const std::size_t n = b / sizeof(double);
    std::span<double> data(reinterpret_cast<double*>(a.data()), n);
    std::vector<double> plain(n, 1.0), ordinary(n, 1.0);
    const int ops = std::max(3, ops_for(b, o.smoke) / 4);
    w.barrier();
    const auto t = medians_alternating(
        o, ops,
        {[&] { crown::co_sum(w, data); }, [&] { crown::co_sum(w, std::span(ordinary)); },
         [&] {
           MPI_Allreduce(MPI_IN_PLACE, plain.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                         comm);
         }});
    const double c = t[0], p = t[1], m = t[2];
    if (me == 0) {
      line("co_sum_heap", b, "us", c * 1e6, "mpi_allreduce", m * 1e6);
      line("co_sum_ordinary", b, "us", p * 1e6, "mpi_allreduce", m * 1e6);
    }
  }

  // all_gather and reduce_scatter of doubles (both ranks take part); `bytes` is one
  // image's block. Ordinary memory (MPI on Crown's private communicator, plus the
  // image-order fold) and coarrays (one-sided reads, in place on one host) against
  // MPI_Allgather / MPI_Reduce_scatter_block on the same data.
  for (std::size_t b : {std::size_t{4096}, std::size_t{256} << 10, std::size_t{4} << 20}) {
    if (o.smoke && b > (std::size_t{256} << 10)) break;
    const std::size_t n = b / sizeof(double), imgs = static_cast<std::size_t>(w.size());
    std::vector<double> mine(n, 1.0 + me), all(n * imgs), in(n * imgs, 0.5 + me), out(n);
    crown::coarray<double> block(w, n), blocks(w, n * imgs);
    const int ops = std::max(3, ops_for(b * imgs, o.smoke) / 4);
    const auto timed = [&](const std::function<void()>& f) {
      w.barrier();
      return median_seconds(o, ops, f);
    };
    const double g =
        timed([&] { crown::all_gather(w, std::span<const double>(mine), std::span(all)); });
    const double gc = timed([&] { crown::all_gather(block, std::span(all)); });
    const double gm = timed([&] {
      MPI_Allgather(mine.data(), static_cast<int>(n), MPI_DOUBLE, all.data(), static_cast<int>(n),
                    MPI_DOUBLE, comm);
    });
    const double r =
        timed([&] { crown::reduce_scatter(w, std::span<const double>(in), std::span(out)); });
    const double rc = timed([&] { crown::reduce_scatter(blocks, std::span(out)); });
    const double rm = timed([&] {
      MPI_Reduce_scatter_block(in.data(), out.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                               comm);
    });
    if (me == 0) {
      line("all_gather_ordinary", b, "us", g * 1e6, "mpi_allgather", gm * 1e6);
      line("all_gather_coarray", b, "us", gc * 1e6, "mpi_allgather", gm * 1e6);
      line("reduce_scatter_ordinary", b, "us", r * 1e6, "mpi_reduce_scatter_block", rm * 1e6);
      line("reduce_scatter_coarray", b, "us", rc * 1e6, "mpi_reduce_scatter_block", rm * 1e6);
    }
  }

  round_trip("at the end");
  MPI_Win_unlock_all(raw_win);
  MPI_Win_free(&raw_win);
  if (shared_win != MPI_WIN_NULL) MPI_Win_free(&shared_win);
  MPI_Comm_free(&host);
}

} // namespace crown_bench
