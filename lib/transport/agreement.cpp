// Collective argument checks on Crown's private communicator of a mesh.
#include "agreement.hpp"
#include "../mesh/crown_comm.hpp"
#include "transfer.hpp"
#include <crown/error.hpp>
#include <vector>

namespace crown::detail {

void check_same_arguments(const mesh& m, std::initializer_list<argument> args,
                          const std::string& op) {
  MPI_Comm comm = crown_comm(m);
  const std::size_t n = args.size();
  std::vector<long long> bounds; // {max v..., max -v...}
  for (const auto& a : args) bounds.push_back(a.value);
  for (const auto& a : args) bounds.push_back(-a.value);
  MPI_Request r;
  complete(MPI_Iallreduce(MPI_IN_PLACE, bounds.data(), static_cast<int>(bounds.size()),
                          MPI_LONG_LONG, MPI_MAX, comm, &r),
           r, "MPI_Allreduce(" + op + " argument check)");
  bool same = true;
  for (std::size_t i = 0; i < n; ++i) same = same && bounds[i] == -bounds[n + i];
  if (same) return;
  // Rare path: find who differs, so the message can name a rank.
  std::vector<long long> mine, all(n * static_cast<std::size_t>(m.size()));
  for (const auto& a : args) mine.push_back(a.value);
  complete(MPI_Iallgather(mine.data(), static_cast<int>(n), MPI_LONG_LONG, all.data(),
                          static_cast<int>(n), MPI_LONG_LONG, comm, &r),
           r, "MPI_Allgather(" + op + " argument check)");
  for (int r = 0; r < m.size(); ++r)
    for (std::size_t i = 0; i < n; ++i) {
      const long long theirs = all[static_cast<std::size_t>(r) * n + i];
      if (theirs != mine[i])
        throw argument_error(op, std::string(args.begin()[i].name) + " is " +
                                     std::to_string(mine[i]) + " here but " +
                                     std::to_string(theirs) + " on rank " +
                                     std::to_string(m.ranks()[static_cast<std::size_t>(r)]));
    }
  throw argument_error(op, "arguments differ between members"); // unreachable in practice
}

} // namespace crown::detail
