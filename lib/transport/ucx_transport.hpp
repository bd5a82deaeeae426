// lib/transport/ucx_transport.hpp — one-sided traffic through UCX (CROWN_TRANSPORT=ucx).
#pragma once
#include "active_messages.hpp"
#include "backend.hpp"
#include "deferred_issues.hpp"
#include <atomic>
#include <memory>
#include <mpi.h>
#include <mutex>
#include <ucp/api/ucp.h>
#include <vector>

namespace crown::detail {

/// UCX's RMA and atomics on the heap: the slice is registered once at start-up, and
/// worker addresses and rkeys are exchanged over MPI; endpoints connect on first use.
/// Where the network has no RDMA (TCP), UCX emulates RMA with messages that the target
/// executes inside ucp_worker_progress, which Crown's progress engine calls on every
/// poll of every wait (and the progress thread, when enabled). A strided transfer of
/// many small runs goes as one active message instead (UCX has no remote strides, and
/// one put per element costs a round trip each over TCP).
class ucx_transfer;

class ucx_transport final : public backend {
public:
  /// Collective over `world`. Throws state_error on every rank when UCX cannot be set
  /// up on some rank (the ranks agree first), so that callers can fall back together.
  ucx_transport(MPI_Comm world, std::byte* heap, std::size_t heap_size);
  ~ucx_transport() override;
  ucx_transport(const ucx_transport&) = delete;
  ucx_transport& operator=(const ucx_transport&) = delete;

  [[nodiscard]] const char* name() const noexcept override { return "ucx"; }
  /// The context lists CUDA among the memory types it can move (reported by crown-info).
  [[nodiscard]] bool lists_cuda_memory() const noexcept;
  /// ucp_put_nbx/ucp_get_nbx per run, then (puts) a nonblocking endpoint flush whose
  /// completion is remote completion.
  async_handle start(bool put, int rank, std::span<const run> runs, std::byte* packed) override;
  std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width, bool floating,
                       std::uint64_t operand, std::uint64_t compare) override;
  void fence() override;

  /// Memory outside the heap registered for remote access (remote_buffer): UCX's
  /// handle and the key other ranks unpack to reach it.
  struct registration {
    ucp_mem_h memory = nullptr;
    std::vector<std::byte> rkey;
  };
  /// ucp_mem_map + ucp_rkey_pack of [address, address + bytes); throws resource_error.
  registration register_memory(void* address, std::size_t bytes);
  void unregister_memory(ucp_mem_h memory) noexcept;
  /// A transfer to or from memory `rank` registered: runs are offsets from `address`,
  /// `rkey` the key it packed (unpacked for this operation, destroyed with it).
  async_handle start_registered(bool put, int rank, std::uint64_t address,
                                std::span<const std::byte> rkey, std::span<const run> runs,
                                std::byte* packed);
  /// The active messages beside UCX (many-run transfers, remote_buffer requests).
  [[nodiscard]] active_messages& messages() noexcept { return *packed_; }
  void quiet() override;
  bool progress() noexcept override;
  /// UCX's own requests need no MPI: the worker serves them (the packed messages do not,
  /// so serve_without_mpi() stops packing strided transfers).
  [[nodiscard]] bool serves_without_mpi() const noexcept override { return true; }
  void serve_without_mpi() noexcept override { pack_strided_.store(false); }
  bool progress_without_mpi() noexcept override;
  /// Sleeps on the worker's event file descriptor (armed), so UCX traffic wakes it.
  void idle_wait(std::chrono::microseconds limit) noexcept override;

private:
  struct peer {
    std::atomic<bool> ready{false};
    ucp_ep_h ep = nullptr;
    ucp_rkey_h rkey = nullptr;
    std::uint64_t base = 0; ///< the peer's heap address
  };
  friend class ucx_transfer;
  peer& connect(int rank);
  /// Waits for a UCX request (driving progress), frees it, throws on failure.
  void wait(ucs_status_ptr_t request, int rank, const char* what);
  void release() noexcept;
  /// ucp_worker_progress, unless another thread is in the worker.
  bool progress_worker() noexcept;
  /// A request's status, UCS_INPROGRESS while it runs.
  ucs_status_t status_of(ucs_status_ptr_t request);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_mem_h memory_ = nullptr;
  std::vector<std::byte> addresses_; ///< every rank's worker address, concatenated
  std::vector<int> address_at_, address_len_;
  std::vector<std::byte> rkeys_; ///< every rank's packed rkey, concatenated
  std::vector<int> rkey_at_, rkey_len_;
  std::vector<std::uint64_t> bases_;
  std::unique_ptr<peer[]> peers_;
  std::unique_ptr<active_messages> packed_; ///< many-run transfers, packed in one message
  /// Off below MPI_THREAD_MULTIPLE with a progress thread: a packed message is served only
  /// inside the target's MPI calls, one put per run by its worker.
  std::atomic<bool> pack_strided_{true};
  int event_fd_ = -1; ///< the worker's, owned by UCX
  int size_ = 0;
  int rank_ = 0;
  std::mutex connecting_;
  /// Every call into the worker holds it; progress and arming only try it.
  progress_gate worker_gate_;
  /// Transfers of 64 KiB and more (and any behind them) are issued by the progress thread.
  deferred_issues deferred_{64 << 10};
};

} // namespace crown::detail
