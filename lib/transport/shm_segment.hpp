// lib/transport/shm_segment.hpp — one shared mapping per (pretend) host, RAII.
#pragma once
#include <cstddef>
#include <mpi.h>

namespace crown::detail {

/// Shared memory holding `bytes_per_rank` for every rank of `host_comm`, mapped by all
/// of them. Host-local rank 0 creates it as a file without a name (O_TMPFILE in
/// /dev/shm, or memfd_create where /dev/shm cannot hold one) and the others open that
/// process's descriptor through /proc/<pid>/fd, so nothing in /dev/shm ever has a name
/// and the memory goes back to the system with the last process, however the job
/// ends. The pages are reserved up front (posix_fallocate, after checking the memory
/// and cgroup headroom), so a heap that does not fit fails here with a config_error
/// naming CROWN_HEAP_SIZE instead of SIGBUS or the OOM killer later. Each rank's slice
/// starts on a page boundary. Collective over `host_comm`.
class shm_segment {
public:
  shm_segment(MPI_Comm host_comm, std::size_t bytes_per_rank);
  ~shm_segment();
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;

  /// Start of the slice that belongs to host-local rank `local_rank`.
  [[nodiscard]] std::byte* slice(int local_rank) const noexcept {
    return base_ + static_cast<std::size_t>(local_rank) * stride_;
  }

private:
  std::byte* base_ = nullptr;
  std::size_t stride_ = 0; ///< bytes_per_rank rounded up to whole pages
  std::size_t total_ = 0;
};

} // namespace crown::detail
