// What tests/trace/run_trace_test.sh traces: on every rank a put to the right-hand
// neighbour (800 bytes), a get from the left-hand one (400 bytes), co_sum (400 bytes),
// co_broadcast (16 bytes from image 0) and sync_all; then, with workers, one actor call
// from the controller to every worker. check_trace.py looks for exactly these.
// With --stall, rank 0 waits in sync_all for ranks that sleep for 30 s: under
// CROWN_WAIT_TIMEOUT it aborts the job and its trace must still be written.
#include <chrono>
#include <crown/crown.hpp>
#include <cstdio>
#include <string_view>
#include <thread>
#include <vector>

namespace {

class tracer {
public:
  explicit tracer(int base) : base_(base) {}
  int id() const { return base_ + crown::this_actor().index; }
  static constexpr auto endpoints = crown::endpoints(&tracer::id);

private:
  int base_;
};

int run(int argc, char** argv) {
  crown::runtime rt(argc, argv);
  const auto& w = rt.world();
  const int me = w.rank(), n = w.size(), right = (me + 1) % n, left = (me + n - 1) % n;
  if (argc > 1 && std::string_view(argv[1]) == "--stall") {
    if (me != 0) std::this_thread::sleep_for(std::chrono::seconds(30));
    crown::sync_all(w);
    return 0;
  }
  crown::coarray<double> a(w, 100), b(w, 50);
  std::vector<double> mine(100, me), got(50);
  for (double& x : b.local()) x = me;
  a.on(right).put(mine); // 800 bytes
  crown::sync_all(w);
  b.on(left).get(std::span(got)); // 400 bytes
  std::vector<double> sum(50, 1.0);
  crown::co_sum(w, std::span(sum));
  std::int64_t pair[2] = {me == 0 ? 7 : 0, me == 0 ? 9 : 0};
  crown::co_broadcast(w, std::span<std::int64_t>(pair), 0);
  if (sum[0] != n || got[0] != left || pair[1] != 9) {
    std::fprintf(stderr, "rank %d: wrong data (sum %g, got %g, pair %lld)\n", me, sum[0], got[0],
                 static_cast<long long>(pair[1]));
    return 1;
  }
  crown::sync_all(w);
  if (n < 2) return 0;
  return rt.control([](crown::controller& c) {
    auto t = c.workers().spawn<tracer>("tracers", 100);
    const auto ids = t.call(&tracer::id).get();
    int expected = 100;
    for (const int id : ids)
      if (id != expected++) throw std::runtime_error("tracer id " + std::to_string(id));
  });
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const crown::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
