// lib/gpu/device_memory.hpp — one rank's device-heap memory and its mappings of the
// same-host peers' device heaps: CUDA VMM (file-descriptor handles) or legacy CUDA IPC.
#pragma once
#include <cstddef>
#include <memory>
#include <mpi.h>
#include <string>
#include <vector>

namespace crown::detail {

/// What a rank reserves at start-up: its own block on its GPU and, for each rank of its
/// host (by rank in the host communicator), a device address of that rank's block.
/// Destruction unmaps the peers, meets them (host barrier), then frees its own memory;
/// a killed process leaves nothing on the host (the driver frees device memory with
/// its last holder; descriptors and abstract sockets die with the process).
class device_memory {
public:
  virtual ~device_memory() = default;
  [[nodiscard]] std::byte* local() const noexcept { return bases_[static_cast<std::size_t>(me_)]; }
  [[nodiscard]] std::byte* peer(int host_rank) const noexcept {
    return bases_[static_cast<std::size_t>(host_rank)];
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// "vmm" or "ipc".
  [[nodiscard]] virtual const char* kind() const noexcept = 0;

protected:
  /// Sizes the table for the ranks of `host`; this rank's slot is `me_`.
  device_memory(MPI_Comm host, std::size_t bytes);
  std::size_t size_ = 0;
  int me_ = 0;
  std::vector<std::byte*> bases_;
};

/// Collective over `host`: `bytes` (rounded up to the allocation granularity) on
/// `device` with cuMemCreate, exported as a POSIX file descriptor, passed to the other
/// ranks (exchange_fds) and mapped there. nullptr on every rank, with `why_not` set,
/// when some rank of the host cannot (no VMM or fd handles, a failed import).
std::unique_ptr<device_memory> map_vmm(MPI_Comm host, int device, std::size_t bytes,
                                       std::string& why_not);

/// Collective over `host`: cudaMalloc, cudaIpcGetMemHandle, handles exchanged with
/// MPI_Allgather, cudaIpcOpenMemHandle. Throws on every rank when some rank fails.
std::unique_ptr<device_memory> map_ipc(MPI_Comm host, int device, std::size_t bytes);

} // namespace crown::detail
