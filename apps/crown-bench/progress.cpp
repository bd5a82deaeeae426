// crown-bench progress: what asynchrony and the progress thread buy and cost, on the
// path to rank 1 (run with CROWN_FAKE_HOSTS=2 or CROWN_SHM=0 so that it is a transport).
//  - overlap: the hidden fraction of a 1 MiB put_async behind computation,
//    (t_put + t_comp - t_both) / t_put, with t_comp calibrated to 1.5 t_put and the
//    target waiting in sync_all (median of 50 each);
//  - idle_cpu: the CPU an idle rank spends over 10 s (both threads of the process),
//    against a target of 2% of a core;
//  - 8 B put/get latency with the progress thread on against off.
#include "bench.hpp"
#include <chrono>
#include <crown/crown.hpp>
#include <sys/resource.h>
#include <thread>

namespace crown_bench {
namespace {

/// Arithmetic that makes no Crown or MPI call (its result is kept, so it stays).
volatile double g_sink = 0;
void spin(long iterations) {
  double x = 1.0;
  for (long i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  g_sink = x;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/// Median seconds of `runs` calls of f, one call each (the overlap needs single runs).
double median_of(int runs, const std::function<void()>& f) {
  std::vector<double> t;
  f();
  for (int i = 0; i < runs; ++i) {
    const double start = MPI_Wtime();
    f();
    t.push_back(MPI_Wtime() - start);
  }
  return median(std::move(t));
}

} // namespace

void progress(const options& o) {
  const auto& w = crown::world();
  if (w.size() != 2) throw crown::argument_error("crown-bench progress", "run it on 2 ranks");
  const char* transport = crown::detail::transport_name(w.ranks()[1 - w.rank()]);
  const std::string group = std::string("progress-") + (transport ? transport : "shm");
  const int me = w.rank();
  const std::size_t bytes = 1 << 20;
  crown::coarray<char> a(w, bytes);
  std::vector<char> src(bytes, 1);
  if (me == 0) print_header();
  const bool thread_default = crown::this_runtime().transports().progress_thread;

  // Overlap: rank 1 waits in sync_all while rank 0 measures.
  const int runs = o.smoke ? 5 : 50;
  if (me == 0) {
    const auto put = [&] { a.on(1).put_async(std::span<const char>(src)).wait(); };
    const double t_put = median_of(runs, put);
    long iterations = 1000;
    while (median_of(3, [&] { spin(iterations); }) < 1.5 * t_put) iterations *= 2;
    const double t_comp = median_of(runs, [&] { spin(iterations); });
    const double t_both = median_of(runs, [&] {
      crown::completion c = a.on(1).put_async(std::span<const char>(src));
      spin(iterations);
      c.wait();
    });
    const double hidden = (t_put + t_comp - t_both) / t_put;
    print_line(group, "overlap_put_hidden", bytes, "fraction", hidden, "target", 0.8);
  }
  crown::sync_all();

  // Idle CPU: nobody calls Crown for a while; the progress thread naps.
  if (thread_default) {
    const auto idle = std::chrono::seconds(o.smoke ? 1 : 10);
    const double before = cpu_seconds();
    std::this_thread::sleep_for(idle);
    const double percent =
        100.0 * (cpu_seconds() - before) / std::chrono::duration<double>(idle).count();
    if (me == 0) print_line(group, "idle_cpu", 0, "%core", percent, "target", 2.0);
    crown::sync_all();
  }

  // 8 B latency with the thread on and off. The target waits in a fresh barrier for
  // each batch: a Crown wait polls (and serves) at full speed for its first few
  // thousand polls, then naps, and a long run would measure the naps.
  const auto latency = [&](bool put) {
    const int ops = o.smoke ? 200 : 2000;
    std::vector<double> batches;
    for (int b = 0; b < o.batches; ++b) {
      w.barrier();
      if (me == 0) {
        const double start = MPI_Wtime();
        for (int i = 0; i < ops; ++i)
          if (put)
            a.on(1).put({0}, 'x');
          else
            (void)a.on(1).get({0});
        batches.push_back((MPI_Wtime() - start) / ops);
      }
    }
    w.barrier();
    if (me != 0) return 0.0;
    return median(batches);
  };
  if (thread_default) { // alternating, three times each: the median of each
    std::vector<double> on_put, on_get, off_put, off_get;
    for (int round = 0; round < 3; ++round) {
      crown::detail::set_progress_thread(false);
      off_put.push_back(latency(true));
      off_get.push_back(latency(false));
      crown::detail::set_progress_thread(true);
      on_put.push_back(latency(true));
      on_get.push_back(latency(false));
    }
    if (me == 0) {
      print_line(group, "put_latency_thread", 8, "us", median(on_put) * 1e6, "no_thread",
                 median(off_put) * 1e6);
      print_line(group, "get_latency_thread", 8, "us", median(on_get) * 1e6, "no_thread",
                 median(off_get) * 1e6);
    }
  }
}

} // namespace crown_bench
