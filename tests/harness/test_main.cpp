// Boost.Test main for Crown's multi-rank suites (see cmake/CrownTesting.cmake).
// CROWN_TEST_HARNESS_MODE: 0 = none, 1 = mpi, 2 = runtime.
#include <boost/test/results_reporter.hpp>
#if defined(CROWN_BOOST_TEST_HEADER_ONLY) // the framework itself, compiled here once
#include <boost/test/included/unit_test.hpp>
#else
#include <boost/test/unit_test.hpp>
#endif
#include <algorithm>
#include <climits>
#include <crown/runtime.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mpi.h>
#include <optional>
#include <sstream>
#include <string>

namespace {

std::ostringstream g_output;

bool verbose() {
  const char* v = std::getenv("CROWNTEST_VERBOSE");
  return v && std::string(v) == "1";
}

bool init_unit_test() {
  if (!verbose()) {
    boost::unit_test::unit_test_log.set_stream(g_output);
    boost::unit_test::results_reporter::set_stream(g_output);
  }
  return true;
}

/// Rank for messages even when MPI is not (or no longer) initialised.
int launcher_rank() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

void print_failure(int rank) {
  std::istringstream lines(g_output.str());
  std::ostringstream prefixed;
  for (std::string line; std::getline(lines, line);)
    prefixed << "[rank " << rank << "] " << line << '\n';
  std::cerr << prefixed.str() << std::flush;
}

[[maybe_unused]] int requested_thread_level() {
  const char* v = std::getenv("CROWNTEST_THREAD_LEVEL");
  const std::string level = v ? v : "multiple";
  if (level == "single") return MPI_THREAD_SINGLE;
  if (level == "funneled") return MPI_THREAD_FUNNELED;
  if (level == "serialized") return MPI_THREAD_SERIALIZED;
  return MPI_THREAD_MULTIPLE;
}

} // namespace

int main(int argc, char** argv) {
#if CROWN_TEST_HARNESS_MODE >= 1
  int provided = 0;
  MPI_Init_thread(&argc, &argv, requested_thread_level(), &provided);
#endif
#if CROWN_TEST_HARNESS_MODE == 2
  std::optional<crown::runtime> rt;
  rt.emplace();
  if (std::getenv("CROWNTEST_REQUIRES_GPU")) {
    int gpus = rt->topology().host().gpus;
    MPI_Allreduce(MPI_IN_PLACE, &gpus, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (gpus == 0) {
      if (rt->rank() == 0) std::printf("SKIP %s: no GPU visible on some host\n", argv[0]);
      rt.reset();
      MPI_Finalize();
      return 77;
    }
  }
  if (std::getenv("CROWNTEST_REQUIRES_GPU_PER_RANK")) { // NCCL: one rank per GPU
    const crown::host_resources& host = rt->topology().host();
    int short_by = std::max(host.ranks - host.gpus, 0);
    MPI_Allreduce(MPI_IN_PLACE, &short_by, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (short_by > 0) {
      if (rt->rank() == 0)
        std::printf("SKIP %s: needs one GPU per rank, but %d ranks share %d GPU(s) on this "
                    "machine (NCCL refuses several ranks on one GPU)\n",
                    argv[0], host.ranks, host.gpus);
      rt.reset();
      MPI_Finalize();
      return 77;
    }
  }
#endif
  const int rc = boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
  const bool failed = rc != 0;
  const int rank = launcher_rank();
  if (failed && !verbose()) print_failure(rank);

  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return rc; // the tests own MPI: mpirun aggregates exit codes

  int failures = failed ? 1 : 0, first = failed ? rank : INT_MAX, size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    if (failures == 0)
      std::printf("%s: all %d ranks passed\n", argv[0], size);
    else
      std::printf("%s: %d of %d ranks failed (first: rank %d)\n", argv[0], failures, size, first);
  }
#if CROWN_TEST_HARNESS_MODE == 2
  rt.reset();
#endif
#if CROWN_TEST_HARNESS_MODE >= 1
  MPI_Finalize();
#endif
  return failures == 0 ? 0 : 1;
}
