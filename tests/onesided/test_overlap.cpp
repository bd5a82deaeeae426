// Asynchrony: put_async, get_async and a halo exchange return before the data moves,
// on every backend, and complete with the right data. Run with CROWN_SHM=0 and no
// progress thread: image 1 then serves nothing while it sits in an MPI call of the
// application's own, which image 0 releases only after it has tested the transfer.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>
#include <numeric>

using namespace crown_test; // w(), me(), n()

namespace {

/// Image 1 is reached through a transport and nothing serves it outside Crown calls.
/// The same answer on every image.
bool served_by_transport() {
  if (n() < 2 || crown::this_runtime().transports().progress_thread) return false;
  const int other = w().ranks()[me() == 0 ? 1 : 0];
  return crown::detail::transport_name(other) != nullptr;
}

/// Image 1 blocks in MPI (not in Crown) until image 0 has run `start`, which reports
/// whether the transfer it started was still incomplete. True on image 0 when it was.
template <typename Start>
bool started_while_target_in_mpi(Start&& start) {
  MPI_Comm comm = w().comm();
  const int one = w().ranks()[1], zero = w().ranks()[0];
  int token = 0;
  bool incomplete = false;
  if (me() == 1) // tells image 0 it is inside MPI, and stays there until released
    MPI_Sendrecv(&token, 1, MPI_INT, zero, 71, &token, 1, MPI_INT, zero, 72, comm,
                 MPI_STATUS_IGNORE);
  if (me() == 0) {
    MPI_Recv(&token, 1, MPI_INT, one, 71, comm, MPI_STATUS_IGNORE);
    incomplete = start();
    MPI_Send(&token, 1, MPI_INT, one, 72, comm);
  }
  return incomplete;
}

} // namespace

BOOST_AUTO_TEST_CASE(put_and_get_async_return_before_the_target_serves_them) {
  if (!served_by_transport()) return;  // load/store or a progress thread: nothing to show
  const std::size_t count = 64 * 1024; // above the active messages' inline size too
  crown::coarray<double> a(w(), count);
  std::vector<double> out(count), in(count, -1.0);
  std::iota(out.begin(), out.end(), 0.5);
  crown::sync_all();
  crown::completion put;
  const bool put_pending = started_while_target_in_mpi([&] {
    put = a.on(1).put_async(out);
    return !put.test();
  });
  if (me() == 0) {
    BOOST_TEST(put_pending, "put_async completed while its target sat in MPI");
    put.wait();
  }
  crown::sync_all();
  if (me() == 1) BOOST_TEST(a(count - 1) == out[count - 1]);
  if (me() == 1) BOOST_TEST(a(0) == 0.5);
  crown::sync_all();
  crown::completion get;
  const bool get_pending = started_while_target_in_mpi([&] {
    get = a.on(1).get_async(in);
    return !get.test_local();
  });
  if (me() == 0) {
    BOOST_TEST(get_pending, "get_async completed while its target sat in MPI");
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
  // Image 1 may still serve image 0's gets in the last poll of the synchronisation that
  // starts the exchange, before it enters MPI: it must not do so in every round.
  int pending_rounds = 0;
  for (int round = 0; round < 5; ++round) {
    const auto mine = static_cast<std::size_t>(me()) * per;
    for (std::size_t i = 0; i < per; ++i) t.local(i) = static_cast<double>(mine + i + round);
    crown::sync_all();
    t.exchange_halos_start();
    pending_rounds += started_while_target_in_mpi([&] { return !t.exchange_halos_test(); });
    t.exchange_halos_finish();
    // Right halo: the first 4096 elements of the right neighbour's block; left halo:
    // the last 4096 of the left one's.
    const std::size_t from = static_cast<std::size_t>(right()) * per + round;
    const std::size_t before = static_cast<std::size_t>(left()) * per + per - 4096 + round;
    for (std::ptrdiff_t i = 0; i < 4096; i += 511) {
      BOOST_TEST(t.local(static_cast<std::ptrdiff_t>(per) + i) ==
                 static_cast<double>(from + static_cast<std::size_t>(i)));
      BOOST_TEST(t.local(i - 4096) == static_cast<double>(before + static_cast<std::size_t>(i)));
    }
    crown::sync_all();
  }
  if (me() == 0) BOOST_TEST(pending_rounds > 0, "every halo exchange completed inside start");
}
