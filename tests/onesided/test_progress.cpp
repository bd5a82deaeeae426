// Progress: one-sided traffic to a rank that computes outside Crown. Over UCX on TCP
// (UCX_TLS=tcp,self) a put or atomic completes only when the target progresses: the
// target serves it on its next Crown call, or at once with CROWN_PROGRESS_THREAD=1.
#include <atomic>
#include <boost/test/tools/assertion_result.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <filesystem>
#include <fstream>
#include <harness/crown_test.hpp>
#include <runtime/cpu_list.hpp>
#include <set>
#include <sstream>

using namespace crown_test; // w(), me(), n()
namespace utf = boost::unit_test;

namespace {

constexpr int rounds = 50;

boost::test_tools::assertion_result progress_thread_on(utf::test_unit_id) {
  const bool on = crown::this_runtime().transports().progress_thread;
  boost::test_tools::assertion_result r = on;
  r.message() << "needs CROWN_PROGRESS_THREAD=1";
  return r;
}

/// Arithmetic that makes no Crown or MPI call, so that nothing progresses on this
/// thread while it runs.
double compute(std::chrono::milliseconds how_long) {
  const auto until = std::chrono::steady_clock::now() + how_long;
  double x = 1.0;
  while (std::chrono::steady_clock::now() < until)
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

/// Every other image puts, gets back and counts into image 0's block.
void origins_hit_image_zero(crown::coarray<std::int64_t>& a) {
  if (me() == 0) return;
  const auto target = a.on(0);
  for (int k = 0; k < rounds; ++k) {
    const std::int64_t v = me() * 1000 + k;
    target.put({static_cast<std::size_t>(me())}, v);
    BOOST_TEST(target.get({static_cast<std::size_t>(me())}) == v);
  }
  (void)target.fetch_add({0}, 1);
}

} // namespace

BOOST_AUTO_TEST_CASE(busy_target_serves_on_its_next_crown_call) {
  crown::coarray<std::int64_t> a(w(), static_cast<std::size_t>(n()));
  crown::sync_all();
  if (me() == 0) BOOST_TEST(compute(std::chrono::milliseconds(300)) > 0.0);
  origins_hit_image_zero(a);
  crown::sync_all(); // the target progresses here, and the origins finish
  if (me() == 0) {
    BOOST_TEST(a(0) == n() - 1);
    for (int r = 1; r < n(); ++r)
      BOOST_TEST(a(static_cast<std::size_t>(r)) == r * 1000 + rounds - 1);
  }
  crown::sync_all();
}

BOOST_AUTO_TEST_CASE(busy_target_is_served_by_the_progress_thread,
                     *utf::precondition(progress_thread_on)) {
  crown::coarray<std::int64_t> a(w(), static_cast<std::size_t>(n()));
  crown::sync_all();
  if (me() == 0) {
    // Plain loads only: without the progress thread the origins' puts and atomics
    // would never complete, and neither would this loop.
    std::atomic_ref<std::int64_t> count(a(0));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (count.load(std::memory_order_acquire) < n() - 1 &&
           std::chrono::steady_clock::now() < deadline)
      (void)compute(std::chrono::milliseconds(1));
    BOOST_TEST(count.load() == n() - 1, "image 0 was not served while it computed");
  }
  origins_hit_image_zero(a);
  crown::sync_all();
  if (me() == 0)
    for (int r = 1; r < n(); ++r)
      BOOST_TEST(a(static_cast<std::size_t>(r)) == r * 1000 + rounds - 1);
  crown::sync_all();
}

namespace {

/// The CPUs a thread of this process named `name` may run on, as /proc lists them.
std::string cpus_of_thread(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (!std::getline(comm, line) || line != name) continue;
    std::ifstream status(task.path() / "status");
    while (std::getline(status, line))
      if (line.starts_with("Cpus_allowed_list:"))
        return line.substr(line.find_first_not_of(" \t", 18));
  }
  return "no thread named " + name;
}

} // namespace

BOOST_AUTO_TEST_CASE(the_progress_thread_runs_where_crown_progress_cpus_says,
                     *utf::precondition(progress_thread_on)) {
  // host (the default): every CPU of this host's ranks (mpirun binds each of 2 ranks
  // to a core, so the thread may also use the other's); rank: this rank's; else a list.
  const std::string choice = crown::config::from_environment().progress_cpus;
  const auto listed = [](const std::string& list) {
    const auto cpus = crown::detail::parse_cpu_list(list).value_or(std::vector<int>{});
    BOOST_TEST_REQUIRE(!cpus.empty(), "not a CPU list: " << list);
    return cpus;
  };
  std::set<int> host;
  for (const auto& p : crown::this_runtime().topology().all()) {
    if (choice == "rank" && p.rank != crown::this_runtime().topology().self().rank) continue;
    const auto cpus = listed(choice == "host" || choice == "rank" ? p.cpuset : choice);
    host.insert(cpus.begin(), cpus.end());
  }
  std::ostringstream expected;
  for (auto it = host.begin(); it != host.end();) { // as the kernel writes it: 0-3,8
    auto last = it;
    while (std::next(last) != host.end() && *std::next(last) == *last + 1) ++last;
    if (it != host.begin()) expected << ',';
    expected << *it;
    if (last != it) expected << '-' << *last;
    it = std::next(last);
  }
  BOOST_TEST(cpus_of_thread("crown-progress") == expected.str());
}

BOOST_AUTO_TEST_CASE(blocking_put_then_the_applications_own_allreduce) {
  // The pattern a new user writes: a blocking put to the right neighbour, then an
  // MPI_Allreduce of the application's own on the user's communicator. The target sits
  // in MPI, not in Crown: only the progress thread (on by default) serves the put.
  crown::coarray<std::int64_t> a(w(), 2);
  for (int round = 0; round < 20; ++round) {
    a.on(right()).put({0}, static_cast<std::int64_t>(me() * 100 + round));
    std::int64_t sum = 1;
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT64_T, MPI_SUM, w().comm());
    BOOST_TEST(sum == n());
    crown::sync_all();
    BOOST_TEST(a(0) == left() * 100 + round);
    crown::sync_all();
  }
}

BOOST_AUTO_TEST_CASE(an_unserved_wait_names_its_target_and_the_rule) {
  // Without a progress thread, a put to a rank that computes outside Crown waits; after
  // a few seconds the wait is reported, naming the target, then completes when the
  // target comes back.
  const bool unserved = !crown::this_runtime().transports().progress_thread && n() >= 2 &&
                        crown::detail::transport_name(w().ranks()[me() == 0 ? 1 : 0]);
  if (!unserved) return;
  crown::coarray<std::int64_t> a(w(), 1);
  std::vector<std::string> lines;
  crown::detail::set_log_sink([&](std::string_view line) { lines.emplace_back(line); });
  crown::sync_all();
  if (me() == 1) BOOST_TEST(compute(std::chrono::milliseconds(6500)) > 0.0);
  if (me() == 0) a.on(1).put({0}, 42);
  crown::sync_all();
  crown::detail::set_log_sink({});
  if (me() == 1) BOOST_TEST(a(0) == 42);
  if (me() == 0) {
    bool named = false;
    for (const auto& l : lines)
      named = named || (l.find("waiting for rank 1: no answer") != std::string::npos &&
                        l.find("MPI_THREAD_MULTIPLE") != std::string::npos);
    BOOST_TEST(named, "no stall report named rank 1");
  }
}

BOOST_AUTO_TEST_CASE(transfers_complete_while_another_thread_drives_progress,
                     *utf::precondition(progress_thread_on)) {
  // Blocking puts and gets to the right neighbour while this rank's progress thread
  // runs MPI's progress beside them. Under the window with osc/ucx (and the preemption
  // shim of progress.window.preempted) this lost a request of MPI_Rput/MPI_Rget and hung.
  crown::coarray<std::int64_t> a(w(), 4);
  const auto right_block = a.on(right());
  for (int round = 0; round < 300; ++round) {
    const std::int64_t v = me() * 100000 + round;
    right_block.put({static_cast<std::size_t>(round % 4)}, v);
    BOOST_TEST_REQUIRE(right_block.get({static_cast<std::size_t>(round % 4)}) == v);
  }
  crown::sync_all();
  for (std::size_t k = 0; k < 4; ++k)
    BOOST_TEST(a(k) == left() * 100000 + 296 + static_cast<std::int64_t>(k));
  crown::sync_all();
}
