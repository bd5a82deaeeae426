// Image control statements over a mesh.
#include "../mesh/crown_comm.hpp"
#include "../runtime/tags.hpp"
#include <algorithm>
#include <crown/detail/fault.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/runtime.hpp>
#include <crown/sync.hpp>
#include <crown/trace.hpp>
#include <vector>

namespace crown {

void sync_all(const mesh& m) {
  const detail::trace_span span("sync", "sync_all", {"images", m.size()});
  detail::fault_point_reached(fault_point::sync_all);
  detail::heap_quiet();
  detail::crown_barrier(m);
  detail::heap_sync_local();
}

void sync_all() { sync_all(world()); }

void sync_images(const mesh& m, std::span<const int> images) {
  const detail::trace_span span("sync", "sync_images",
                                {"images", static_cast<std::int64_t>(images.size())});
  MPI_Comm comm = detail::crown_comm(m);
  const int me = m.rank();
  std::vector<int> peers(images.begin(), images.end());
  std::sort(peers.begin(), peers.end());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] < 0 || peers[i] >= m.size())
      throw argument_error("sync_images on " + m.to_string(), "image " + std::to_string(peers[i]) +
                                                                  " is out of range [0, " +
                                                                  std::to_string(m.size()) + ")");
    if (i > 0 && peers[i] == peers[i - 1])
      throw argument_error("sync_images on " + m.to_string(),
                           "image " + std::to_string(peers[i]) + " is named twice");
  }
  peers.erase(std::remove(peers.begin(), peers.end(), me), peers.end());
  detail::heap_quiet();
  constexpr int tag = detail::tags::sync_images.first;
  std::vector<MPI_Request> requests(2 * peers.size(), MPI_REQUEST_NULL);
  char token = 0;
  std::vector<char> received(peers.size());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    check_mpi(MPI_Irecv(&received[i], 1, MPI_CHAR, peers[i], tag, comm, &requests[2 * i]),
              "sync_images: MPI_Irecv");
    check_mpi(MPI_Isend(&token, 1, MPI_CHAR, peers[i], tag, comm, &requests[2 * i + 1]),
              "sync_images: MPI_Isend");
  }
  int done = 0;
  const int waited_on = peers.size() == 1 ? m.ranks()[static_cast<std::size_t>(peers[0])] : -1;
  detail::wait_until(detail::wait_site{"sync_images", waited_on, &m}, [&] {
    check_mpi(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        "sync_images: MPI_Testall");
    return done != 0;
  });
  detail::heap_sync_local();
}

void progress() { // transports and asynchronous collectives alike, as every Crown wait
  if (const detail::progress_fn f = detail::progress_hook()) f();
}
void fence() { detail::heap_fence(); }

void sync_memory() {
  detail::heap_quiet();
  detail::heap_sync_local();
}

} // namespace crown
