// crown-bench actors: the controller's round trips, pipelined throughput, broadcast of
// payloads and memory use, beside raw MPI measured in the same run on the same ranks:
// a ping-pong between ranks 0 and 1, MPI_Bcast + MPI_Gather, and a pipelined
// ping-pong with as many messages in flight.
#include "bench.hpp"
#include <crown/crown.hpp>
#include <fstream>

namespace crown_bench {
namespace {

struct bench_actor {
  void noop() {}
  std::size_t sink(const std::vector<char>& payload) { return payload.size(); }
  static constexpr auto endpoints = crown::endpoints(&bench_actor::noop, &bench_actor::sink);
};

/// Resident set size of this process in KiB (Linux).
double rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}

struct baselines {
  double ping_pong = 0;          ///< s per round trip, ranks 0 and 1
  double bcast_gather_small = 0; ///< s, 8 bytes out, one int back from everyone
  double pipelined = 0;          ///< round trips per second, `window` in flight
  std::vector<std::pair<std::size_t, double>> bcast_gather; ///< bytes, s
};

constexpr int window = 1000;

/// Raw MPI on a communicator of its own, every rank taking part.
baselines measure_mpi(const options& o, MPI_Comm comm, const std::vector<std::size_t>& sizes) {
  baselines b;
  int me = 0, n = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  int token = 0;
  const int ops = o.smoke ? 200 : 10000;
  MPI_Barrier(comm);
  if (me < 2) {
    b.ping_pong = median_seconds(o, ops, [&] {
      if (me == 0) {
        MPI_Send(&token, 1, MPI_INT, 1, 0, comm);
        MPI_Recv(&token, 1, MPI_INT, 1, 0, comm, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(&token, 1, MPI_INT, 0, 0, comm, MPI_STATUS_IGNORE);
        MPI_Send(&token, 1, MPI_INT, 0, 0, comm);
      }
    });
    std::vector<int> out(window), back(window);
    std::vector<MPI_Request> r(2 * window);
    const double per_window = median_seconds(o, o.smoke ? 3 : 20, [&] {
      if (me == 0) {
        for (int i = 0; i < window; ++i) {
          MPI_Irecv(&back[static_cast<std::size_t>(i)], 1, MPI_INT, 1, 1, comm, &r[2 * i]);
          MPI_Isend(&out[static_cast<std::size_t>(i)], 1, MPI_INT, 1, 1, comm, &r[2 * i + 1]);
        }
        MPI_Waitall(2 * window, r.data(), MPI_STATUSES_IGNORE);
      } else {
        for (int i = 0; i < window; ++i) {
          MPI_Recv(&token, 1, MPI_INT, 0, 1, comm, MPI_STATUS_IGNORE);
          MPI_Send(&token, 1, MPI_INT, 0, 1, comm);
        }
      }
    });
    b.pipelined = window / per_window;
  }
  MPI_Barrier(comm);
  std::vector<int> gathered(static_cast<std::size_t>(n));
  auto bcast_gather = [&](std::vector<char>& payload) {
    return median_seconds(o, std::max(3, ops_for(payload.size(), o.smoke) / 4), [&] {
      MPI_Bcast(payload.data(), static_cast<int>(payload.size()), MPI_CHAR, 0, comm);
      MPI_Gather(&token, 1, MPI_INT, gathered.data(), 1, MPI_INT, 0, comm);
    });
  };
  std::vector<char> small(8);
  b.bcast_gather_small = bcast_gather(small);
  for (std::size_t bytes : sizes) {
    std::vector<char> payload(bytes, 'x');
    b.bcast_gather.emplace_back(bytes, bcast_gather(payload));
  }
  return b;
}

} // namespace

void actors(const options& o) {
  auto& rt = crown::this_runtime();
  if (rt.size() < 2)
    throw crown::argument_error("crown-bench actors",
                                "run it on 2 or more ranks (rank 0 controls)");
  std::vector<std::size_t> sizes;
  for (std::size_t b = 1024; b <= (o.smoke ? std::size_t{64} << 10 : std::size_t{16} << 20);
       b *= (o.smoke ? 64 : 4))
    sizes.push_back(b);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const baselines mpi = measure_mpi(o, comm, sizes);
  MPI_Comm_free(&comm);

  const int code = rt.control([&](crown::controller& c) {
    const std::string group = "actors";
    print_header();
    auto a = c.workers().spawn<bench_actor>("bench");
    const int ops = o.smoke ? 200 : 10000;
    const double one = median_seconds(o, ops, [&] { a.call_one({0}, &bench_actor::noop).get(); });
    print_line(group, "round_trip_one", 0, "us", one * 1e6, "mpi_ping_pong", mpi.ping_pong * 1e6);
    const double all = median_seconds(o, ops, [&] { a.call(&bench_actor::noop).get(); });
    print_line(group, "round_trip_all", 0, "us", all * 1e6, "mpi_bcast_gather",
               mpi.bcast_gather_small * 1e6);
    std::vector<crown::future<void>> in_flight;
    const double per_window = median_seconds(o, o.smoke ? 3 : 20, [&] {
      in_flight.clear();
      for (int i = 0; i < window; ++i) in_flight.push_back(a.call_one({0}, &bench_actor::noop));
      for (auto& f : in_flight) f.get();
    });
    print_line(group, "throughput", 0, "calls/s", window / per_window, "mpi_pipelined",
               mpi.pipelined);
    // Completion bookkeeping must not grow with the calls in flight: draining 8x the
    // calls should take 8x the time (the baseline is 8 x the 5,000-call figure).
    const auto drain = [&](int calls) {
      std::vector<crown::future<void>> pending;
      pending.reserve(static_cast<std::size_t>(calls));
      return median_seconds(o, o.smoke ? 1 : 5, [&] {
        pending.clear();
        for (int i = 0; i < calls; ++i) pending.push_back(a.call_one({0}, &bench_actor::noop));
        for (auto& f : pending) f.get();
      });
    };
    const double drain_few = drain(5000);
    print_line(group, "drain_in_flight", 5000, "ms", drain_few * 1e3, "mpi_pipelined_x5000",
               5000 / mpi.pipelined * 1e3);
    print_line(group, "drain_in_flight", 40000, "ms", drain(40000) * 1e3, "drain_5000_x8",
               8 * drain_few * 1e3);
    for (const auto& [bytes, seconds] : mpi.bcast_gather) {
      const std::vector<char> payload(bytes, 'x');
      const double t = median_seconds(o, std::max(3, ops_for(bytes, o.smoke) / 4), [&] {
        a.broadcast(&bench_actor::sink, payload);
        c.flush();
      });
      print_line(group, "broadcast", bytes, "us", t * 1e6, "mpi_bcast_gather", seconds * 1e6);
    }
    const int calls = o.smoke ? 10000 : 1000000;
    const double before = rss_kib();
    for (int i = 0; i < calls; ++i) a.call_one({0}, &bench_actor::noop).get();
    print_line(group, "rss_after_calls", static_cast<std::size_t>(calls), "KiB", rss_kib(),
               "rss_before", before);
  });
  if (code != 0) throw crown::error("crown-bench actors", "the controller failed");
}

} // namespace crown_bench
