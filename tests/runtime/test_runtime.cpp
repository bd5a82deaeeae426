// A runtime attached to the harness's MPI_THREAD_MULTIPLE world.
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <harness/crown_test.hpp>

using crown_test::world_rank;
using crown_test::world_size;

BOOST_AUTO_TEST_CASE(attaches_to_the_applications_mpi) {
  auto& rt = crown::this_runtime();
  BOOST_TEST(!rt.owns_mpi());
  BOOST_TEST(rt.rank() == world_rank());
  BOOST_TEST(rt.size() == world_size());
  BOOST_TEST(crown::world().size() == world_size());
  BOOST_TEST((rt.thread_support() == crown::thread_level::multiple));
  BOOST_CHECK_NO_THROW(rt.require_thread_level(crown::thread_level::multiple, "controller mode"));
  BOOST_TEST(crown::runtime::active());
}

BOOST_AUTO_TEST_CASE(world_communicator_is_a_private_duplicate_returning_errors) {
  MPI_Comm c = crown::world().comm();
  int cmp = MPI_UNEQUAL;
  MPI_Comm_compare(c, MPI_COMM_WORLD, &cmp);
  BOOST_TEST(cmp == MPI_CONGRUENT); // same group, separate context: no message collisions
  MPI_Errhandler ours = MPI_ERRHANDLER_NULL, apps = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(c, &ours);
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &apps);
  BOOST_TEST((ours == MPI_ERRORS_RETURN));
  BOOST_TEST((apps == MPI_ERRORS_ARE_FATAL)); // the application's choice is left alone
  MPI_Errhandler_free(&ours);
  MPI_Errhandler_free(&apps);
}

BOOST_AUTO_TEST_CASE(mpi_errors_become_exceptions_naming_rank_and_call) {
  const int me = world_rank(), n = world_size();
  int value = 7;
  try {
    crown::check_mpi(MPI_Send(&value, 1, MPI_INT, n, 0, crown::world().comm()),
                     "MPI_Send to rank n");
    BOOST_FAIL("MPI_Send to a rank outside the communicator did not fail");
  } catch (const crown::mpi_error& e) {
    BOOST_TEST(e.error_class() == MPI_ERR_RANK);
    BOOST_TEST(e.rank() == me);
    const std::string what = e.what();
    BOOST_TEST(what.starts_with("crown::mpi_error: rank " + std::to_string(me) +
                                ": MPI_Send to rank n: MPI_ERR_RANK"),
               what);
  }
}

BOOST_AUTO_TEST_CASE(second_runtime_is_refused) {
  try {
    crown::runtime again;
    BOOST_FAIL("a second runtime was constructed");
  } catch (const crown::state_error& e) {
    BOOST_TEST(std::string(e.what()).find("already active") != std::string::npos, e.what());
  }
  BOOST_TEST(crown::runtime::active()); // the failed attempt did not disturb the live one
  BOOST_TEST(crown::world().size() == world_size());
}

BOOST_AUTO_TEST_CASE(log_lines_carry_the_rank) {
  std::vector<std::string> lines;
  crown::detail::set_log_sink([&](std::string_view l) { lines.emplace_back(l); });
  crown::log(crown::log_level::warn, "checkpoint ", 3, " written");
  crown::log(crown::log_level::info, "not shown at the default level");
  crown::detail::set_log_sink({});
  BOOST_TEST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0] == "[crown warn rank " + std::to_string(world_rank()) +
                             "] checkpoint 3 written\n"); // one host: no host name
}

BOOST_AUTO_TEST_CASE(transports_report_what_was_built_and_probed) {
  const auto& t = crown::this_runtime().transports();
  BOOST_TEST(t.shm);
  BOOST_TEST(t.ucx == bool(CROWN_HAVE_UCX));
  BOOST_TEST(t.ucx_version.empty() == !CROWN_HAVE_UCX);
  BOOST_TEST(t.nccl == bool(CROWN_HAVE_NCCL));
  BOOST_TEST(t.mpi_rma == (bool(CROWN_EXPECT_RMA) && world_size() > 1));
  if (world_size() == 1) {
    BOOST_TEST(t.mpi_rma_problem == "a single rank has no peers to reach");
  } else if (!t.mpi_rma) {
    BOOST_TEST(t.mpi_rma_problem.find("osc/pt2pt") != std::string::npos, t.mpi_rma_problem);
    BOOST_TEST(t.mpi_rma_problem.find("(mpirun --mca osc ucx,sm)") != std::string::npos,
               t.mpi_rma_problem);
  } else {
    BOOST_TEST(t.mpi_rma_problem.empty());
  }
}
