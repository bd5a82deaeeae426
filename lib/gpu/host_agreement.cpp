// The first failure of a collective step, known to every rank.
#include "host_agreement.hpp"
#include <climits>
#include <crown/error.hpp>
#include <cstdio>

namespace crown::detail {

std::string first_problem(MPI_Comm comm, const std::string& problem, const char* who) {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  int first = problem.empty() ? INT_MAX : rank;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm),
            "MPI_Allreduce(first failing rank)");
  if (first == INT_MAX) return {};
  char text[768] = {};
  if (rank == first) std::snprintf(text, sizeof text, "%s", problem.c_str());
  check_mpi(MPI_Bcast(text, sizeof text, MPI_CHAR, first, comm), "MPI_Bcast(failure)");
  return std::string(who) + " " + std::to_string(first) + ": " + text;
}

} // namespace crown::detail
