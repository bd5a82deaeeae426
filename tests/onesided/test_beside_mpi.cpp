// Crown's waits beside the application's own MPI traffic on one host. Image 1 sends
// image 0 many small messages while image 0 computes, then receives image 0's 1 MiB
// message: its receive completes, but the acknowledgement Open MPI owes the sender
// (no shared-memory fragment was free) leaves only inside some MPI call of image 1.
// Image 1 then waits in a Crown wait that needs nothing from MPI (a host co_sum, an
// event, a lock) for image 0, which is still in MPI_Wait on that send. Before the
// waits entered MPI now and then, each hung (2 ranks: 5 of 5 runs, with 16 fragments).
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>
#include <mpi.h>
#include <thread>
#include <vector>

using namespace crown_test; // w(), me(), n()

namespace {

constexpr int small_messages = 400;

/// Leaves image 1's acknowledgement of image 0's large message inside Open MPI, then
/// runs `wait` on every image; `after_send` runs on image 0 once its send completed.
template <typename Wait, typename AfterSend>
void wait_after_a_received_message(Wait&& wait, AfterSend&& after_send) {
  const MPI_Comm comm = w().comm();
  std::vector<char> big(std::size_t{1} << 20, static_cast<char>(me()));
  std::vector<long> small(small_messages, me());
  std::vector<MPI_Request> requests(small_messages, MPI_REQUEST_NULL);
  if (me() == 0) {
    MPI_Request send = MPI_REQUEST_NULL;
    MPI_Isend(big.data(), static_cast<int>(big.size()), MPI_CHAR, 1, 8, comm, &send);
    for (auto& r : requests) MPI_Irecv(&small[&r - requests.data()], 1, MPI_LONG, 1, 7, comm, &r);
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // computes: no MPI call
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    after_send();
  } else if (me() == 1) {
    for (auto& r : requests) MPI_Isend(&small[&r - requests.data()], 1, MPI_LONG, 0, 7, comm, &r);
    MPI_Recv(big.data(), static_cast<int>(big.size()), MPI_CHAR, 0, 8, comm, MPI_STATUS_IGNORE);
    BOOST_TEST(big.front() == 0);
    BOOST_TEST(big.back() == 0);
  }
  wait();
  MPI_Waitall(small_messages, requests.data(), MPI_STATUSES_IGNORE);
  if (me() == 0) BOOST_TEST(small.back() == 1);
  crown::sync_all();
}

} // namespace

BOOST_AUTO_TEST_CASE(a_host_co_sum_after_a_received_message) {
  double warm = 1;
  crown::co_sum(w(), warm); // the mesh's co_* scratch is set up (by MPI) before the pattern
  long sum = me();
  wait_after_a_received_message([&] { crown::co_sum(w(), sum); }, [] {});
  BOOST_TEST(sum == static_cast<long>(n()) * (n() - 1) / 2);
}

BOOST_AUTO_TEST_CASE(an_event_wait_after_a_received_message) {
  crown::event posted(w());
  crown::sync_all();
  wait_after_a_received_message(
      [&] {
        if (me() == 1) posted.wait();
      },
      [&] { posted.post(1); });
  BOOST_TEST(posted.query() == 0);
}

BOOST_AUTO_TEST_CASE(a_lock_wait_after_a_received_message) {
  crown::image_lock lock(w());
  crown::sync_all();
  // Image 0 holds image 1's lock over its send; image 1 waits for it.
  if (me() == 0) lock.lock(1);
  crown::sync_all();
  wait_after_a_received_message(
      [&] {
        if (me() == 1) {
          lock.lock(1);
          lock.unlock(1);
        }
      },
      [&] { lock.unlock(1); });
}
