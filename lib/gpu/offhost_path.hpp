// lib/gpu/offhost_path.hpp — how a rank reaches another rank's device heap: the decision
// alone, from facts (no CUDA here: it is tested in every build), and the probe of what
// MPI and UCX can do with device memory.
#pragma once
#include <string>

namespace crown::detail {

/// What the probe found on this rank (the same build and library on every rank).
struct offhost_facts {
  /// MPI reads device memory: 1 (MPIX_Query_cuda_support() says so), 0 (it says not, or
  /// mpi-ext.h declares no CUDA support), -1 (this MPI has no such extension).
  int mpi_cuda = -1;
  bool ucx_cuda = false; ///< the UCX context lists CUDA among its memory types
  /// Ranks with a device heap on other hosts than this rank's (its own heap present).
  int staged_peers = 0;
};

struct offhost_choice {
  const char* path = "none"; ///< "staged" or "none"
  std::string why;           ///< one line for crown-info
};

/// Device heaps on other hosts are reached by requests their owners serve through
/// page-locked host memory ("staged"), whatever the probe finds: it is reported, so that
/// a CUDA-aware MPI or UCX shows, but not yet used (see docs/gpu-memory.md).
offhost_choice choose_offhost_path(const offhost_facts& f);

/// The path from one rank to another's device heap: "self", "mapped" (same host: CUDA
/// IPC or VMM), "staged" (another host), or "none" (no device heap there or here, or no
/// active messages to carry the requests).
const char* device_link(bool self, bool mapped, bool heap_here, bool heap_there, bool messages);

/// MPI's CUDA awareness as offhost_facts::mpi_cuda reports it (needs MPI initialised).
int probe_mpi_cuda() noexcept;

} // namespace crown::detail
