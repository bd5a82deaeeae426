// Asynchrony: put_async, get_async and a halo exchange return before the data moves,
// on every backend, and complete with the right data. Run with CROWN_SHM=0 and no
// progress thread, so that a target computing outside Crown cannot serve anything.
// (The waits are set up with pauses, but nothing asserts a duration.)
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>
#include <numeric>
#include <thread>

using namespace crown_test; // w(), me(), n()

namespace {

/// Arithmetic that makes no Crown or MPI call, so nothing progresses while it runs.
double compute(std::chrono::milliseconds how_long) {
  const auto until = std::chrono::steady_clock::now() + how_long;
  double x = 1.0;
  while (std::chrono::steady_clock::now() < until)
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

/// Image 1 computes outside Crown for long; image 0 starts while it does. True on
/// image 0 when the transfer was still incomplete right after it started.
template <typename Start>
bool started_before_target_served(Start&& start) {
  crown::sync_all();
  bool incomplete = false;
  if (me() == 1) BOOST_TEST(compute(std::chrono::milliseconds(1500)) > 0.0);
  if (me() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // image 1 now computes
    incomplete = start();
  }
  crown::sync_all();
  return incomplete;
}

/// Image 1 is reached through a transport and nothing serves it while it computes.
/// The same answer on every image.
bool served_by_transport() {
  if (n() < 2 || crown::this_runtime().transports().progress_thread) return false;
  const int other = w().ranks()[me() == 0 ? 1 : 0];
  return crown::detail::transport_name(other) != nullptr;
}

} // namespace

BOOST_AUTO_TEST_CASE(put_and_get_async_return_before_the_target_serves_them) {
  if (!served_by_transport()) return;  // load/store or a progress thread: nothing to show
  const std::size_t count = 64 * 1024; // above the active messages' inline size too
  crown::coarray<double> a(w(), count);
  std::vector<double> out(count), in(count, -1.0);
  std::iota(out.begin(), out.end(), 0.5);
  crown::completion put;
  const bool put_pending = started_before_target_served([&] {
    put = a.on(1).put_async(out);
    return !put.test();
  });
  if (me() == 0) {
    BOOST_TEST(put_pending, "put_async completed while its target computed");
    put.wait();
  }
  crown::sync_all();
  if (me() == 1) BOOST_TEST(a(count - 1) == out[count - 1]);
  if (me() == 1) BOOST_TEST(a(0) == 0.5);
  crown::completion get;
  const bool get_pending = started_before_target_served([&] {
    get = a.on(1).get_async(in);
    return !get.test_local();
  });
  if (me() == 0) {
    BOOST_TEST(get_pending, "get_async completed while its target computed");
    get.wait();
    BOOST_TEST(in == out);
  }
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(halo_start_returns_before_the_halos_arrive) {
  if (!served_by_transport()) return;
  // A 1-D array split over the images, halos of 4096 each side: image 0's right halo
  // comes from image 1.
  const std::size_t per = 16384;
  const crown::mesh line = w().reshape({{"x", -1}});
  crown::dist_tensor<double, 1> t(line, {per * static_cast<std::size_t>(n())}, {crown::shard(0)},
                                  crown::halo_spec<1>{{4096}, {true}});
  const auto mine = static_cast<std::size_t>(me()) * per;
  for (std::size_t i = 0; i < per; ++i) t.local(i) = static_cast<double>(mine + i);
  bool pending = false;
  crown::sync_all();
  t.exchange_halos_start();
  if (me() == 1) BOOST_TEST(compute(std::chrono::milliseconds(1500)) > 0.0);
  if (me() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    pending = !t.exchange_halos_test();
    BOOST_TEST(pending, "the halo exchange completed while a neighbour computed");
  }
  t.exchange_halos_finish();
  // Right halo: the first 4096 elements of the right neighbour's block.
  const std::size_t from = static_cast<std::size_t>(right()) * per;
  const std::size_t before = static_cast<std::size_t>(left()) * per + per - 4096;
  for (std::ptrdiff_t i = 0; i < 4096; i += 511) {
    BOOST_TEST(t.local(static_cast<std::ptrdiff_t>(per) + i) == static_cast<double>(from + i));
    BOOST_TEST(t.local(i - 4096) == static_cast<double>(before + i));
  }
  crown::sync_all();
}
