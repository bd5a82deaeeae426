// Members of a collective allocation converge on one offset.
#include "offset_agreement.hpp"
#include "transfer.hpp"

namespace crown::detail {

std::uint64_t agree_on_offset(const free_list& space, MPI_Comm comm, std::size_t bytes,
                              const std::string& op) {
  std::uint64_t candidate = 0;
  for (;;) {
    const std::uint64_t next = space.first_fit_from(candidate, bytes);
    long long bounds[2] = {static_cast<long long>(next), -static_cast<long long>(next)};
    MPI_Request r;
    complete(MPI_Iallreduce(MPI_IN_PLACE, bounds, 2, MPI_LONG_LONG, MPI_MAX, comm, &r), r,
             "MPI_Allreduce(" + op + ")");
    candidate = static_cast<std::uint64_t>(bounds[0]);
    if (candidate >= space.capacity()) return space.capacity();
    if (bounds[0] == -bounds[1]) return candidate; // every member proposed the same offset
  }
}

} // namespace crown::detail
