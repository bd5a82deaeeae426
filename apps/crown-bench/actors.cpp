// crown-bench actors: the controller's round trips, pipelined throughput, broadcast of
// payloads and memory use, beside raw MPI measured in the same run on the same ranks:
// a ping-pong between ranks 0 and 1 and a pipelined one with as many messages in
// flight, MPI_Bcast + MPI_Gather (each timed alternately with Crown's figures, but for
// the 8-byte broadcast, timed before the control session).
#include "bench.hpp"
#include <crown/crown.hpp>
#include <fstream>
#include <optional>

namespace crown_bench {
namespace {

/// The bench's own communicator (a copy of the world made before the control session):
/// the MPI baselines of the controller's figures run on it (between ranks 0 and 1, or
/// among all for the ring and the broadcast) while the session runs, alternately with
/// Crown's figures, so that both see the same machine.
MPI_Comm g_comm = MPI_COMM_NULL;

/// Seconds for `ops` MPI round trips of one int between ranks 0 and 1 of g_comm, one at
/// a time or `in_flight` at a time (rank 0 posts them, rank 1 answers each). Rank `me`
/// plays its side.
double mpi_round_trips(int me, int ops, int in_flight) {
  int token = 0;
  std::vector<int> out(static_cast<std::size_t>(in_flight)), back(out.size());
  std::vector<MPI_Request> r(2 * out.size());
  const double start = MPI_Wtime();
  if (me == 1) {
    for (int i = 0; i < ops; ++i) {
      MPI_Recv(&token, 1, MPI_INT, 0, 0, g_comm, MPI_STATUS_IGNORE);
      MPI_Send(&token, 1, MPI_INT, 0, 0, g_comm);
    }
  } else if (in_flight == 1) {
    for (int i = 0; i < ops; ++i) {
      MPI_Send(&token, 1, MPI_INT, 1, 0, g_comm);
      MPI_Recv(&token, 1, MPI_INT, 1, 0, g_comm, MPI_STATUS_IGNORE);
    }
  } else {
    for (int done = 0; done < ops; done += in_flight) {
      for (int i = 0; i < in_flight; ++i) {
        MPI_Irecv(&back[static_cast<std::size_t>(i)], 1, MPI_INT, 1, 0, g_comm, &r[2 * i]);
        MPI_Isend(&out[static_cast<std::size_t>(i)], 1, MPI_INT, 1, 0, g_comm, &r[2 * i + 1]);
      }
      MPI_Waitall(2 * in_flight, r.data(), MPI_STATUSES_IGNORE);
    }
  }
  return MPI_Wtime() - start;
}

/// Seconds for `stream_messages` one-way MPI messages of one int from rank 1 to rank 0
/// of g_comm, sent in windows of 256 (as Crown's channel hands them to MPI: Open MPI
/// slows down quadratically with tens of thousands of sends in flight). Rank `me`
/// (0 receives, 1 sends) plays its side; rank 0's time is the figure.
double mpi_stream(int me);
/// Seconds for `ring_messages` MPI hops around ranks 1..n-1 of g_comm (one token per
/// lap, rank 1 starts it); every one of those ranks calls it.
double mpi_ring();
/// Seconds for `ops` rounds of MPI_Bcast of `bytes` from rank 0 of g_comm and MPI_Gather
/// of one int back (the broadcast's baseline); every rank of g_comm calls it. Rank 0
/// sends from `root_data` where given (the pages Crown's broadcasts send from).
double mpi_bcast_gather(std::size_t bytes, int ops, char* root_data = nullptr);

struct bench_actor {
  void noop() {}
  /// Rank 1's side of MPI round trips with the controller (the baseline, same session).
  void mpi_answer(int ops) { mpi_round_trips(1, ops, 1); }
  /// Rank 1's side of the MPI stream (the port send's baseline, same session).
  void mpi_stream_send() { mpi_stream(1); }
  /// This rank's part of the MPI ring (the port ring's baseline, same session).
  double mpi_ring_lap() { return mpi_ring(); }
  /// This rank's part of MPI broadcasts (the broadcast's baseline, same session).
  void mpi_bcast_side(std::size_t bytes, int ops) { (void)mpi_bcast_gather(bytes, ops); }
  /// A large array reaches a span parameter in the bytes received and a vector parameter
  /// as the vector it was received into (no copy either way).
  std::size_t sink(std::span<const char> payload) { return payload.size(); }
  std::size_t sink_vector(const std::vector<char>& payload) { return payload.size(); }
  /// Seconds for `ops` round trips to the actor at `peer` of `mesh`, one after another.
  double round_trips(crown::actor_mesh<bench_actor> mesh, int peer, int ops) {
    const double start = MPI_Wtime();
    for (int i = 0; i < ops; ++i) mesh.call_one({peer}, &bench_actor::noop).get();
    return MPI_Wtime() - start;
  }
  /// Sends `count` ints to `to`, without waiting.
  void send_many(crown::port<int> to, int count) {
    for (int i = 0; i < count; ++i) to.send(i);
  }
  /// A ring through the actors over ports: open this actor's receiver ...
  crown::port<int> open_ring() {
    auto [port, inbox] = crown::open_channel<int>();
    inbox_.emplace(std::move(inbox));
    return port;
  }
  /// ... then pass `messages` tokens around it (actor 0 starts each); returns seconds.
  double circulate(crown::port<int> next, int messages) {
    const int me = crown::this_actor().index, actors = crown::this_actor().mesh.size();
    const double start = MPI_Wtime();
    for (int m = 0; m < messages; m += actors) { // one lap per token
      if (me == 0) next.send(m);
      const int token = inbox_->recv();
      if (me != 0) next.send(token);
    }
    return MPI_Wtime() - start;
  }
  /// Median seconds per read_into (or write_from) of the whole of `b`, `batches` of `ops`.
  double buffer_transfers(crown::remote_buffer<char> b, bool write, int ops, int batches) {
    std::vector<char> local(b.size(), 'y');
    return timed(ops, batches, [&] {
      if (write)
        b.write_from(std::span<const char>(local));
      else
        b.read_into(std::span<char>(local));
    });
  }
  /// The same with the one-sided layer: get (or put) of `bytes` at `p` in rank 0's heap.
  double heap_transfers(crown::global_ptr<char> p, std::size_t bytes, bool write, int ops,
                        int batches) {
    std::vector<char> local(bytes, 'y');
    return timed(ops, batches, [&] {
      if (write)
        p.put(std::span<const char>(local));
      else
        p.get(std::span<char>(local));
    });
  }
  static constexpr auto endpoints =
      crown::endpoints(&bench_actor::noop, &bench_actor::mpi_answer, &bench_actor::mpi_stream_send,
                       &bench_actor::mpi_ring_lap, &bench_actor::mpi_bcast_side, &bench_actor::sink,
                       &bench_actor::sink_vector, &bench_actor::round_trips,
                       &bench_actor::send_many, &bench_actor::open_ring, &bench_actor::circulate,
                       &bench_actor::buffer_transfers, &bench_actor::heap_transfers);

private:
  template <typename F>
  static double timed(int ops, int batches, F&& f) {
    std::vector<double> t;
    f(); // warm-up
    for (int b = 0; b < batches; ++b) {
      const double start = MPI_Wtime();
      for (int i = 0; i < ops; ++i) f();
      t.push_back((MPI_Wtime() - start) / ops);
    }
    return median(std::move(t));
  }
  std::optional<crown::receiver<int>> inbox_;
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
  double worker_ping_pong = 0;   ///< s per round trip, ranks 1 and 2 (3 or more ranks)
  double bcast_gather_small = 0; ///< s, 8 bytes out, one int back from everyone
};

constexpr int window = 1000;
constexpr int ring_messages = 1000;
constexpr int stream_messages = 10000;

double mpi_stream(int me) {
  constexpr int in_flight = 256;
  std::vector<int> many(in_flight);
  std::vector<MPI_Request> sends(in_flight);
  const double start = MPI_Wtime();
  if (me == 1) {
    for (int i = 0; i < stream_messages; i += in_flight) {
      const int k = std::min(in_flight, stream_messages - i);
      for (int j = 0; j < k; ++j)
        MPI_Isend(&many[static_cast<std::size_t>(j)], 1, MPI_INT, 0, 2, g_comm, &sends[j]);
      MPI_Waitall(k, sends.data(), MPI_STATUSES_IGNORE);
    }
  } else {
    for (int i = 0; i < stream_messages; ++i)
      MPI_Recv(&many[0], 1, MPI_INT, 1, 2, g_comm, MPI_STATUS_IGNORE);
  }
  return MPI_Wtime() - start;
}

double mpi_ring() {
  int me = 0, n = 0, token = 0, out = 0;
  MPI_Comm_rank(g_comm, &me);
  MPI_Comm_size(g_comm, &n);
  const int members = n - 1, at = me - 1;
  const int next = 1 + (at + 1) % members, prev = 1 + (at + members - 1) % members;
  const double start = MPI_Wtime();
  for (int m = 0; m < ring_messages; m += members) {
    MPI_Request sent = MPI_REQUEST_NULL;
    if (at == 0) MPI_Isend(&out, 1, MPI_INT, next, 4, g_comm, &sent);
    MPI_Recv(&token, 1, MPI_INT, prev, 4, g_comm, MPI_STATUS_IGNORE);
    if (at != 0) MPI_Send(&token, 1, MPI_INT, next, 4, g_comm);
    MPI_Wait(&sent, MPI_STATUS_IGNORE);
  }
  return MPI_Wtime() - start;
}

double mpi_bcast_gather(std::size_t bytes, int ops, char* root_data) {
  int me = 0, n = 0, token = 0;
  MPI_Comm_rank(g_comm, &me);
  MPI_Comm_size(g_comm, &n);
  // Kept from call to call, as Crown's actors keep the vectors attachments arrive in.
  static std::vector<char> payload;
  payload.resize(bytes, 'x');
  char* const data = me == 0 && root_data ? root_data : payload.data();
  std::vector<int> gathered(static_cast<std::size_t>(n));
  MPI_Barrier(g_comm); // timed from when every rank is in: not the workers' call dispatch
  const double start = MPI_Wtime();
  for (int i = 0; i < ops; ++i) {
    MPI_Bcast(data, static_cast<int>(bytes), MPI_CHAR, 0, g_comm);
    MPI_Gather(&token, 1, MPI_INT, gathered.data(), 1, MPI_INT, 0, g_comm);
  }
  return MPI_Wtime() - start;
}

/// Raw MPI on a communicator of its own, every rank taking part.
baselines measure_mpi(const options& o, MPI_Comm comm) {
  baselines b;
  int me = 0, n = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  int token = 0;
  const int ops = o.smoke ? 200 : 10000;
  MPI_Barrier(comm);
  if (n >= 3 && me >= 1 && me <= 2) { // the two workers the actor-to-actor figure uses
    const int peer = 3 - me;
    b.worker_ping_pong = median_seconds(o, ops, [&] {
      if (me == 1) {
        MPI_Send(&token, 1, MPI_INT, peer, 3, comm);
        MPI_Recv(&token, 1, MPI_INT, peer, 3, comm, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(&token, 1, MPI_INT, peer, 3, comm, MPI_STATUS_IGNORE);
        MPI_Send(&token, 1, MPI_INT, peer, 3, comm);
      }
    });
  }
  MPI_Barrier(comm);
  // Rank 0 prints: the figures measured on workers travel to it.
  MPI_Bcast(&b.worker_ping_pong, 1, MPI_DOUBLE, n >= 3 ? 1 : 0, comm);
  MPI_Barrier(comm);
  const int small_ops = std::max(3, ops_for(8, o.smoke) / 4);
  b.bcast_gather_small =
      median_seconds(o, 1, [&] { (void)mpi_bcast_gather(8, small_ops); }) / small_ops;
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
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  const baselines mpi = measure_mpi(o, g_comm);

  const int code = rt.control([&](crown::controller& c) {
    const std::string group = "actors";
    print_header();
    auto a = c.workers().spawn<bench_actor>("bench");
    const int ops = o.smoke ? 200 : 10000;
    // Batches of Crown calls and of MPI round trips between the same ranks, alternately
    // (rank 1 answers the MPI ones inside an endpoint): medians of each, per round trip.
    const auto alternately = [&](int calls, int in_flight, const std::function<void()>& batch) {
      std::vector<double> crown_t, mpi_t;
      batch(); // warm-up
      for (int b = 0; b < (o.smoke ? 3 : o.batches); ++b) {
        const double start = MPI_Wtime();
        batch();
        crown_t.push_back((MPI_Wtime() - start) / calls);
        auto answer = a.call_one({0}, &bench_actor::mpi_answer, calls);
        mpi_t.push_back(mpi_round_trips(0, calls, in_flight) / calls);
        answer.get();
      }
      return std::pair(median(crown_t), median(mpi_t));
    };
    const auto [one, ping_pong] = alternately(ops, 1, [&] {
      for (int i = 0; i < ops; ++i) a.call_one({0}, &bench_actor::noop).get();
    });
    print_line(group, "round_trip_one", 0, "us", one * 1e6, "mpi_ping_pong", ping_pong * 1e6);
    const double all = median_seconds(o, ops, [&] { a.call(&bench_actor::noop).get(); });
    print_line(group, "round_trip_all", 0, "us", all * 1e6, "mpi_bcast_gather",
               mpi.bcast_gather_small * 1e6);
    std::vector<crown::future<void>> in_flight;
    const int windows = o.smoke ? 3 : 20;
    const auto [per_call, mpi_per_call] = alternately(windows * window, window, [&] {
      for (int w = 0; w < windows; ++w) {
        in_flight.clear();
        for (int i = 0; i < window; ++i) in_flight.push_back(a.call_one({0}, &bench_actor::noop));
        for (auto& f : in_flight) f.get();
      }
    });
    print_line(group, "throughput", 0, "calls/s", 1 / per_call, "mpi_pipelined", 1 / mpi_per_call);
    // Completion bookkeeping must not grow with the calls in flight: draining 8x the
    // calls should take 8x the time (the baseline is 8 x the 5,000-call figure). The
    // two sizes are timed alternately, so that both see the same machine.
    {
      std::vector<crown::future<void>> pending;
      const auto drain = [&](int calls) {
        const double start = MPI_Wtime();
        pending.clear();
        for (int i = 0; i < calls; ++i) pending.push_back(a.call_one({0}, &bench_actor::noop));
        for (auto& f : pending) f.get();
        return MPI_Wtime() - start;
      };
      std::vector<double> few, many;
      drain(5000); // warm-up
      drain(40000);
      for (int b = 0; b < (o.smoke ? 3 : o.batches); ++b) {
        few.push_back(drain(5000));
        many.push_back(drain(40000));
      }
      const double drain_few = median(few);
      print_line(group, "drain_in_flight", 5000, "us", drain_few * 1e6, "mpi_pipelined_x5000",
                 5000 * mpi_per_call * 1e6);
      print_line(group, "drain_in_flight", 40000, "us", median(many) * 1e6, "drain_5000_x8",
                 8 * drain_few * 1e6);
    }
    // Actor to actor: the actor on rank 1 calls the one on rank 2 (3 or more ranks).
    if (rt.size() >= 3) {
      const int batch = o.smoke ? 200 : 5000;
      std::vector<double> per_call;
      for (int b = 0; b < (o.smoke ? 3 : o.batches); ++b)
        per_call.push_back(a.call_one({0}, &bench_actor::round_trips, a, 1, batch).get() / batch);
      print_line(group, "actor_to_actor", 0, "us", median(per_call) * 1e6, "mpi_ping_pong_workers",
                 mpi.worker_ping_pong * 1e6);
    }
    // Ports: one actor streams ints to the controller.
    {
      // Batches of Crown's stream and of MPI's between the same ranks, alternately.
      auto [port, inbox] = crown::open_channel<int>();
      const int count = stream_messages;
      std::vector<double> crown_t, mpi_t;
      for (int b = -1; b < (o.smoke ? 3 : o.batches); ++b) { // -1: warm-up
        const double start = MPI_Wtime();
        a.call_one({0}, &bench_actor::send_many, port, count).get();
        for (int i = 0; i < count; ++i) (void)inbox.recv();
        const double seconds = MPI_Wtime() - start;
        auto sender = a.call_one({0}, &bench_actor::mpi_stream_send);
        const double mpi_seconds = mpi_stream(0);
        sender.get();
        if (b < 0) continue;
        crown_t.push_back(seconds);
        mpi_t.push_back(mpi_seconds);
      }
      print_line(group, "port_send", 0, "msgs/s", count / median(crown_t), "mpi_isend_stream",
                 count / median(mpi_t));
    }
    // A ring of 1,000 messages through every actor, over ports.
    {
      const auto ports = a.call(&bench_actor::open_ring).get();
      const int actors = a.mesh().size();
      // Crown's ring and MPI's through the same ranks, alternately (actor i on rank i+1).
      std::vector<double> laps, mpi_laps;
      for (int b = 0; b < (o.smoke ? 3 : o.batches); ++b) {
        std::vector<crown::future<double>> each;
        for (int i = 0; i < actors; ++i)
          each.push_back(a.call_one({i}, &bench_actor::circulate,
                                    ports[static_cast<std::size_t>((i + 1) % actors)],
                                    ring_messages));
        laps.push_back(each[0].get());
        for (std::size_t i = 1; i < each.size(); ++i) (void)each[i].get();
        mpi_laps.push_back(a.call(&bench_actor::mpi_ring_lap).get()[0]);
      }
      print_line(group, "port_ring_1000", static_cast<std::size_t>(actors), "us",
                 median(laps) * 1e6, "mpi_ring_1000", median(mpi_laps) * 1e6);
    }
    // Batches of Crown's broadcasts (span and vector parameters) and of MPI_Bcast +
    // MPI_Gather on the same ranks, alternately (the workers run their side of MPI's in
    // an endpoint), both from the same pages: on this VM a copy's speed depends on which
    // pages it reads (docs/benchmarks.md), which would otherwise move the ratio.
    for (const std::size_t bytes : sizes) {
      std::vector<char> payload(bytes, 'x');
      const int calls = std::max(3, ops_for(bytes, o.smoke) / 4);
      std::vector<double> span_t, vector_t, mpi_t;
      const auto batch = [&](auto endpoint) {
        const double start = MPI_Wtime();
        for (int i = 0; i < calls; ++i) {
          a.broadcast(endpoint, payload);
          c.flush();
        }
        return (MPI_Wtime() - start) / calls;
      };
      for (int b = -1; b < (o.smoke ? 3 : o.batches); ++b) { // -1: warm-up
        const double span_s = batch(&bench_actor::sink),
                     vector_s = batch(&bench_actor::sink_vector);
        auto sides = a.call(&bench_actor::mpi_bcast_side, bytes, calls);
        const double mpi_s = mpi_bcast_gather(bytes, calls, payload.data()) / calls;
        (void)sides.get();
        if (b < 0) continue;
        span_t.push_back(span_s);
        vector_t.push_back(vector_s);
        mpi_t.push_back(mpi_s);
      }
      const double mpi_s = median(mpi_t);
      print_line(group, "broadcast", bytes, "us", median(span_t) * 1e6, "mpi_bcast_gather",
                 mpi_s * 1e6);
      print_line(group, "broadcast_vector", bytes, "us", median(vector_t) * 1e6, "mpi_bcast_gather",
                 mpi_s * 1e6);
    }
    // remote_buffer over the controller's ordinary memory, read and written by the actor
    // on rank 1, beside the one-sided layer's get and put of rank 0's heap (same ranks).
    for (const std::size_t bytes :
         {std::size_t{64} << 10, std::size_t{1} << 20, std::size_t{16} << 20}) {
      std::vector<char> memory(bytes, 'x');
      const crown::remote_buffer<char> buffer(std::span<char>(memory), "bench");
      const auto heap = crown::allocate<char>(bytes);
      const int ops = std::max(4, ops_for(bytes, o.smoke) / 8), batches = o.smoke ? 3 : o.batches;
      for (const bool write : {false, true}) {
        const double crown_s =
            a.call_one({0}, &bench_actor::buffer_transfers, buffer, write, ops, batches).get();
        const double heap_s =
            a.call_one({0}, &bench_actor::heap_transfers, heap, bytes, write, ops, batches).get();
        print_line(group, write ? "remote_buffer_write" : "remote_buffer_read", bytes, "GB/s",
                   bytes / crown_s / 1e9, write ? "heap_put" : "heap_get", bytes / heap_s / 1e9);
      }
      crown::deallocate(heap);
    }
    const int calls = o.smoke ? 10000 : 1000000;
    const double before = rss_kib();
    for (int i = 0; i < calls; ++i) a.call_one({0}, &bench_actor::noop).get();
    print_line(group, "rss_after_calls", static_cast<std::size_t>(calls), "KiB", rss_kib(),
               "rss_before", before);
  });
  MPI_Comm_free(&g_comm);
  if (code != 0) throw crown::error("crown-bench actors", "the controller failed");
}

} // namespace crown_bench
