// The cross-host device path: the decision and the probe of MPI's CUDA awareness.
#include "offhost_path.hpp"
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace crown::detail {

offhost_choice choose_offhost_path(const offhost_facts& f) {
  if (f.staged_peers == 0) return {"none", "no rank with a device heap on another host"};
  const std::string mpi = f.mpi_cuda == 1   ? "MPI is CUDA-aware (MPIX_Query_cuda_support)"
                          : f.mpi_cuda == 0 ? "MPI is not CUDA-aware"
                                            : "MPI has no CUDA-awareness extension";
  const std::string ucx = f.ucx_cuda ? "UCX lists CUDA memory" : "UCX has no CUDA memory type";
  const bool direct = f.mpi_cuda == 1 || f.ucx_cuda;
  return {"staged", std::to_string(f.staged_peers) + " ranks' device heaps on other hosts, " +
                        "through page-locked host memory in pipelined chunks (" + mpi + ", " + ucx +
                        (direct ? "; device pointers on the wire are not used yet)" : ")")};
}

const char* device_link(bool self, bool mapped, bool heap_here, bool heap_there, bool messages) {
  if (!heap_here || !heap_there) return "none";
  if (self) return "self";
  if (mapped) return "mapped";
  return messages ? "staged" : "none";
}

int probe_mpi_cuda() noexcept {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() ? 1 : 0;
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  return 0; // the extension exists and says this build has no CUDA support
#else
  return -1;
#endif
}

} // namespace crown::detail
