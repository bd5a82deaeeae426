// lib/gpu/fd_exchange.hpp — hands one file descriptor from every rank of a host to every
// other (SCM_RIGHTS over abstract Unix sockets). Needs no GPU: CUDA VMM exports its
// device-heap handles as such descriptors, and the tests pass memfds.
#pragma once
#include "../runtime/unique_fd.hpp"
#include <mpi.h>
#include <vector>

namespace crown::detail {

/// Collective over `host` (ranks of one machine): every rank offers `mine` and gets the
/// others' descriptors, indexed by rank in `host` (its own slot stays empty). Each rank
/// listens on an abstract socket whose name carries its pid and a random token (nothing
/// is created in the file system, and the socket vanishes with the process, however it
/// ends); every rank connects to every other and sends its descriptor with its rank;
/// a receiver accepts only connections from the pids announced over MPI (SO_PEERCRED).
/// Failures anywhere are reported on every rank as a state_error naming the rank and the
/// call that failed: the sends are agreed before anyone accepts (a failed one makes
/// nobody wait for connections), the whole exchange at the end.
std::vector<unique_fd> exchange_fds(MPI_Comm host, int mine);

} // namespace crown::detail
