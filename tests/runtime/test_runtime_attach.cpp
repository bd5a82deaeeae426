// The application owns MPI (initialised at MPI_THREAD_FUNNELED by the harness).
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <cstdlib>
#include <harness/crown_test.hpp>
#include <optional>
#include <string>
#include <vector>

using crown_test::world_rank;
using crown_test::world_size;

namespace {
bool mpi_finalized() {
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}
template <typename Error, typename F>
std::string error_of(F&& f) {
  return crown_test::what_of<Error>(std::forward<F>(f));
}
} // namespace

BOOST_AUTO_TEST_CASE(attaches_at_the_applications_thread_level) {
  crown::runtime rt;
  BOOST_TEST(!rt.owns_mpi());
  BOOST_TEST((rt.thread_support() == crown::thread_level::funneled));
  BOOST_TEST(rt.transports().mpi_rma == (world_size() > 1)); // no probe below MULTIPLE
  const auto m = error_of<crown::state_error>(
      [&] { rt.require_thread_level(crown::thread_level::multiple, "controller mode"); });
  BOOST_TEST(m.find("controller mode: needs MPI_THREAD_MULTIPLE but MPI provides "
                    "MPI_THREAD_FUNNELED; initialise MPI with MPI_Init_thread") !=
                 std::string::npos,
             m);
  BOOST_CHECK_NO_THROW(rt.require_thread_level(crown::thread_level::funneled, "SPMD coarrays"));
  rt.world().barrier();
}

BOOST_AUTO_TEST_CASE(destroying_an_attached_runtime_leaves_mpi_running) {
  std::optional<crown::mesh> kept;
  {
    crown::runtime rt;
    kept = rt.world();
    (void)kept->comm();
  }
  BOOST_TEST(!mpi_finalized());
  BOOST_TEST(!crown::runtime::active());
  const auto m = error_of<crown::state_error>([] { (void)crown::world(); });
  BOOST_TEST(m.find("already destroyed") != std::string::npos, m);
  // Pure operations on a mesh that outlived its runtime still work; communication does not.
  BOOST_TEST(kept->size() == world_size());
  BOOST_TEST(error_of<crown::state_error>([&] { kept->barrier(); }).find("was destroyed") !=
             std::string::npos);
  // MPI is still the application's: it keeps working.
  int sum = 1;
  MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  BOOST_TEST(sum == world_size());
}

BOOST_AUTO_TEST_CASE(attaches_again_after_detaching) {
  for (int round = 0; round < 2; ++round) {
    crown::runtime rt;
    BOOST_TEST(rt.size() == world_size());
    rt.world().barrier();
  }
}

BOOST_AUTO_TEST_CASE(attaches_to_a_communicator_the_application_passes) {
  const int me = world_rank(), n = world_size();
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
  {
    crown::runtime rt(half);
    const int expected = (n + 1 - me % 2) / 2; // ranks with my parity
    BOOST_TEST(rt.size() == expected);
    BOOST_TEST(rt.rank() == me / 2);
    BOOST_TEST(rt.world().size() == expected);
    int sum = me;
    crown::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, rt.world().comm()),
                     "allreduce");
    int expected_sum = 0;
    for (int r = me % 2; r < n; r += 2) expected_sum += r;
    BOOST_TEST(sum == expected_sum);
    BOOST_TEST(rt.topology().all().size() == static_cast<std::size_t>(expected));
  }
  MPI_Comm_free(&half);
  const auto m = error_of<crown::argument_error>([] { crown::runtime rt(MPI_COMM_NULL); });
  BOOST_TEST(m.find("MPI_COMM_NULL") != std::string::npos, m);
}

BOOST_AUTO_TEST_CASE(bad_configuration_fails_on_every_rank_and_leaves_no_runtime) {
  setenv("CROWN_BIND", "cores", 1);
  const auto m = error_of<crown::config_error>([] { crown::runtime rt; });
  unsetenv("CROWN_BIND");
  BOOST_TEST(m.find("CROWN_BIND: invalid value 'cores'") != std::string::npos, m);
  BOOST_TEST(!crown::runtime::active());

  // Only rank 0 is misconfigured: it reports its own error, every other rank the same
  // config_error as rank 0's, instead of hanging in the next collective.
  if (world_rank() == 0) setenv("CROWN_FAKE_HOSTS", "zero", 1);
  const auto one = error_of<crown::config_error>([] { crown::runtime rt; });
  BOOST_TEST(one.find(std::string("CROWN_FAKE_HOSTS: ") + (world_rank() == 0 ? "" : "on rank 0: ") +
                      "invalid value 'zero'") != std::string::npos,
             one);
  unsetenv("CROWN_FAKE_HOSTS");

  setenv("CROWN_FAKE_HOSTS", std::to_string(world_size() + 1).c_str(), 1);
  const auto too_many = error_of<crown::config_error>([] { crown::runtime rt; });
  unsetenv("CROWN_FAKE_HOSTS");
  BOOST_TEST(too_many.find("every pretend host needs at least one") != std::string::npos, too_many);

  crown::runtime rt; // and a good configuration still starts afterwards
  BOOST_TEST(rt.size() == world_size());
}

BOOST_AUTO_TEST_CASE(progress_thread_below_multiple_only_where_no_mpi_call_serves) {
  // The harness initialised MPI at FUNNELED: a second thread may not call MPI. Active
  // messages are served inside MPI calls, so CROWN_PROGRESS_THREAD=1 is refused there;
  // UCX's worker serves without MPI, so the thread runs (by default too: progress_levels).
  if (world_size() == 1) return; // nothing to serve: no transport
  setenv("CROWN_SHM", "0", 1);
  setenv("CROWN_PROGRESS_THREAD", "1", 1);
  setenv("CROWN_TRANSPORT", "am", 1);
  const auto m = error_of<crown::config_error>([] { crown::runtime rt; });
  BOOST_TEST(m.find("CROWN_PROGRESS_THREAD: a progress thread cannot run here: "
                    "MPI_THREAD_FUNNELED lets no second thread call MPI, and the am transport "
                    "needs an MPI call to serve a request") != std::string::npos,
             m);
  BOOST_TEST(!crown::runtime::active());
#if CROWN_HAVE_UCX
  setenv("CROWN_TRANSPORT", "ucx", 1);
  setenv("CROWN_LOG", "info", 1);
  std::vector<std::string> lines;
  crown::detail::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  {
    crown::runtime rt;
    crown::detail::set_log_sink({});
    // Rank 0 says at start-up which transport and which progress the job got, and why.
    const auto said = std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
      return l.find("one-sided transport off-host: ucx (CROWN_TRANSPORT=ucx); progress: thread "
                    "(MPI_THREAD_FUNNELED: the thread makes no MPI call") != std::string::npos;
    });
    BOOST_TEST(said == (world_rank() == 0 ? 1 : 0));
    BOOST_TEST(rt.transports().progress_thread);
    BOOST_TEST(rt.transports().progress == "thread");
    BOOST_TEST(rt.transports().progress_why.find("MPI_THREAD_FUNNELED: the thread makes no MPI "
                                                 "call") != std::string::npos);
    // A strided put (one put per run, never a packed message the target would serve
    // only inside MPI) to the right neighbour, checked there.
    const int me = rt.rank(), n = rt.size();
    crown::coarray<int> a(rt.world(), 64);
    std::vector<int> odd(32);
    for (int i = 0; i < 32; ++i) odd[static_cast<std::size_t>(i)] = me * 1000 + i;
    a.on((me + 1) % n).put({{1, 64, 2}}, std::span<const int>(odd));
    crown::sync_all();
    const int left = (me + n - 1) % n;
    for (int i = 0; i < 32; ++i)
      BOOST_TEST(a(static_cast<std::size_t>(2 * i + 1)) == left * 1000 + i);
  }
#endif
  unsetenv("CROWN_LOG");
  unsetenv("CROWN_SHM");
  unsetenv("CROWN_PROGRESS_THREAD");
  unsetenv("CROWN_TRANSPORT");
}

BOOST_AUTO_TEST_CASE(unknown_variables_are_warned_about_by_rank_zero) {
  std::vector<std::string> lines;
  crown::detail::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  setenv("CROWN_BNID", "core", 1);
  { crown::runtime rt; }
  unsetenv("CROWN_BNID");
  crown::detail::set_log_sink({});
  const bool warned = std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("CROWN_BNID is ignored (did you mean CROWN_BIND?)") != std::string::npos;
  });
  BOOST_TEST(warned == (world_rank() == 0));
}

BOOST_AUTO_TEST_CASE(attached_runtimes_leave_osc_alone_and_advise_once) {
  // Attached, Crown sets nothing in the environment; with one-sided traffic through an
  // MPI window and no osc/ucx, rank 0 says what to launch with, once per process.
  const bool user_set = std::getenv("OMPI_MCA_osc") != nullptr;
  std::vector<std::string> lines;
  crown::detail::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  setenv("CROWN_TRANSPORT", "mpi", 1);
  setenv("CROWN_SHM", "0", 1);
  for (int round = 0; round < 2; ++round) {
    crown::runtime rt;
    BOOST_TEST((std::getenv("OMPI_MCA_osc") != nullptr) == user_set);
  }
  unsetenv("CROWN_TRANSPORT");
  unsetenv("CROWN_SHM");
  crown::detail::set_log_sink({});
  const auto advice = std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("launch with --mca osc ucx,sm") != std::string::npos;
  });
  const bool expected = world_rank() == 0 && world_size() > 1 && !user_set;
  BOOST_TEST(advice == (expected ? 1 : 0));
}
