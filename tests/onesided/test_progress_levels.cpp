// Progress at every MPI thread level: an application that initialised MPI itself (the
// harness, at CROWNTEST_THREAD_LEVEL) attaches Crown, puts to a rank on another (pretend)
// host, then calls MPI collectives of its own. The target sits in MPI, not in Crown:
// FUNNELED and SERIALIZED over UCX are served by the progress thread, which makes no MPI
// call; SINGLE and the active-message transport below MULTIPLE have no thread, and
// CROWN_WAIT_TIMEOUT ends their job naming the cause (tests/onesided/CMakeLists.txt).
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <cstdlib>
#include <harness/crown_test.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

using namespace crown_test; // w(), me(), n(), right(), left()

namespace {

/// The application's MPI thread level, as the harness asked for it.
std::string level_asked() {
  const char* v = std::getenv("CROWNTEST_THREAD_LEVEL");
  return v ? v : "multiple";
}

/// One runtime for every test case, attached to the harness's MPI.
struct attached {
  attached() { rt.emplace(); }
  ~attached() { rt.reset(); }
  std::optional<crown::runtime> rt;
};
BOOST_TEST_GLOBAL_FIXTURE(attached);

constexpr int rounds = 20;

/// A blocking put to the right neighbour (on the other pretend host for half the ranks),
/// then `collective`, the application's own MPI call, then the check that the value
/// arrived.
template <typename Collective>
void put_then(Collective&& collective) {
  crown::coarray<std::int64_t> a(w(), 2);
  for (int round = 0; round < rounds; ++round) {
    a.on(right()).put({0}, static_cast<std::int64_t>(me() * 100 + round));
    collective(round);
    crown::sync_all();
    BOOST_TEST(a(0) == left() * 100 + round);
    crown::sync_all();
  }
}

void allreduce_of_ones() {
  std::int64_t sum = 1;
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT64_T, MPI_SUM, w().comm());
  BOOST_TEST(sum == n());
}

} // namespace

BOOST_AUTO_TEST_CASE(says_which_transport_and_progress_it_got) {
  const auto& t = crown::this_runtime().transports();
  const std::string level = level_asked();
  BOOST_TEST(crown::this_runtime().topology().num_hosts() == (n() > 1 ? 2 : 1));
  if (n() == 1) return;
  const char* chosen = std::getenv("CROWN_TRANSPORT");
  const std::string expected = chosen ? chosen : "ucx"; // auto prefers UCX where built
  BOOST_TEST(t.heap_transport == expected);
  BOOST_TEST(!t.heap_transport_why.empty());
  const bool thread =
      level == "multiple" || ((level == "funneled" || level == "serialized") && expected == "ucx");
  BOOST_TEST(t.progress_thread == thread);
  BOOST_TEST(t.progress == (thread ? "thread" : "crown-calls"));
  if (level == "single")
    BOOST_TEST(t.progress_why.find("MPI_THREAD_SINGLE allows no thread but the main one") !=
                   std::string::npos,
               t.progress_why);
  else if (!thread)
    BOOST_TEST(t.progress_why.find("needs an MPI call to serve a request") != std::string::npos,
               t.progress_why);
}

BOOST_AUTO_TEST_CASE(blocking_put_then_the_applications_allreduce) {
  put_then([](int) { allreduce_of_ones(); });
}

BOOST_AUTO_TEST_CASE(strided_put_then_the_applications_allreduce) {
  // Many small runs: over UCX at MULTIPLE one packed message (served by the thread's
  // MPI progress), below it one put per run (a packed message would wait for the target
  // to leave MPI).
  crown::coarray<std::int32_t> a(w(), 256);
  std::vector<std::int32_t> every_third(86);
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < every_third.size(); ++i)
      every_third[i] = me() * 100000 + round * 1000 + static_cast<std::int32_t>(i);
    a.on(right()).put({{0, 256, 3}}, std::span<const std::int32_t>(every_third));
    allreduce_of_ones();
    crown::sync_all();
    int wrong = 0; // one check, so every rank reaches the next collective
    for (std::size_t i = 0; i < every_third.size(); ++i)
      wrong += a(3 * i) != left() * 100000 + round * 1000 + static_cast<std::int32_t>(i);
    BOOST_TEST(wrong == 0, "round " << round << ": " << wrong << " elements wrong");
    crown::sync_all();
  }
}

BOOST_AUTO_TEST_CASE(blocking_put_then_the_applications_barrier) {
  put_then([](int) { MPI_Barrier(w().comm()); });
}

BOOST_AUTO_TEST_CASE(blocking_put_then_the_applications_bcast) {
  put_then([](int round) {
    int value = me() == n() - 1 ? round * 7 : -1;
    MPI_Bcast(&value, 1, MPI_INT, n() - 1, w().comm());
    BOOST_TEST(value == round * 7);
  });
}
