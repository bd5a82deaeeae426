// lib/transport/shm_segment.hpp — one shared mapping per (pretend) host, RAII.
#pragma once
#include <cstddef>
#include <mpi.h>

namespace crown::detail {

/// A POSIX shared-memory segment holding `bytes_per_rank` for every rank of
/// `host_comm`, mapped by all of them. The pages are reserved up front
/// (posix_fallocate), so a small /dev/shm fails here with a clear error instead of
/// SIGBUS later; the name is unlinked as soon as every rank has mapped it, so
/// nothing is left behind even if the job dies. Collective over `host_comm`.
class shm_segment {
public:
  shm_segment(MPI_Comm host_comm, std::size_t bytes_per_rank);
  ~shm_segment();
  shm_segment(const shm_segment&) = delete;
  shm_segment& operator=(const shm_segment&) = delete;

  /// Start of the slice that belongs to host-local rank `local_rank`.
  [[nodiscard]] std::byte* slice(int local_rank) const noexcept {
    return base_ + static_cast<std::size_t>(local_rank) * bytes_per_rank_;
  }

private:
  std::byte* base_ = nullptr;
  std::size_t bytes_per_rank_ = 0;
  std::size_t total_ = 0;
};

} // namespace crown::detail
