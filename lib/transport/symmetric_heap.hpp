// lib/transport/symmetric_heap.hpp — the host symmetric heap: shared segment + one backend.
#pragma once
#include "active_messages.hpp"
#include "backend.hpp"
#include "shm_segment.hpp"
#include <cstdint>
#include <map>
#include <memory>
#include <mpi.h>
#include <mutex>
#include <string>
#include <vector>

namespace crown::detail {

struct runtime_state;

/// Free space of one rank's heap. Collective blocks grow from the bottom (first fit
/// at or above a proposed offset, so members can converge on one offset); local
/// blocks come from the top, away from them.
class free_list {
public:
  explicit free_list(std::size_t capacity);
  /// Lowest offset >= `from` where `bytes` fit, or capacity() when none does.
  [[nodiscard]] std::uint64_t first_fit_from(std::uint64_t from, std::size_t bytes) const;
  /// Highest offset where `bytes` fit, or capacity() when none does.
  [[nodiscard]] std::uint64_t last_fit(std::size_t bytes) const;
  void take(std::uint64_t offset, std::size_t bytes);
  /// Returns the block at `offset` to the free space; false if no block starts there.
  bool give(std::uint64_t offset);
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::size_t in_use() const noexcept { return in_use_; }
  [[nodiscard]] std::size_t largest_free() const;
  /// Bytes of the block taken at `offset`, or 0 when no block starts there.
  [[nodiscard]] std::size_t block_bytes(std::uint64_t offset) const;

private:
  std::size_t capacity_;
  std::size_t in_use_ = 0;
  std::map<std::uint64_t, std::size_t> free_; ///< offset -> bytes, coalesced
  std::map<std::uint64_t, std::size_t> used_;
};

/// Every rank's slice of the heap is reachable either by load/store (same host, shared
/// segment: shm_backend.hpp) or through the one backend chosen at start-up for every
/// other peer: an MPI window created over that same memory, UCX with the slice
/// registered, or active messages.
class symmetric_heap {
public:
  /// Maps the shared segment. Collective over the runtime's host communicator.
  explicit symmetric_heap(runtime_state& st);
  /// Collective over the world: sets up the cross-host path when some peer needs one
  /// (several hosts, or CROWN_SHM=0), as CROWN_TRANSPORT says.
  void connect(runtime_state& st);
  ~symmetric_heap();
  symmetric_heap(const symmetric_heap&) = delete;
  symmetric_heap& operator=(const symmetric_heap&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] int world_size() const noexcept { return static_cast<int>(peers_.size()); }
  [[nodiscard]] std::byte* local(std::uint64_t offset) const noexcept { return mine_ + offset; }
  [[nodiscard]] std::byte* peer(int rank, std::uint64_t offset) const noexcept {
    std::byte* base = peers_[static_cast<std::size_t>(rank)];
    return base ? base + offset : nullptr;
  }
  /// The backend for `rank`, a peer not reachable by load/store; throws state_error
  /// when there is none.
  [[nodiscard]] backend& backend_for(int rank) const;
  /// The backend that reaches peers off this host, or nullptr when every peer shares memory.
  [[nodiscard]] backend* transport() const noexcept { return transport_.get(); }
  [[nodiscard]] bool has_transport() const noexcept { return transport_ != nullptr; }
  /// The transport is UCX and its context moves CUDA memory (a probe crown-info reports).
  [[nodiscard]] bool transport_lists_cuda_memory() const noexcept;
  /// Active messages to every rank, for what only the target can do (remote_buffer
  /// requests): the transport's own when it is am or ucx, else a set of their own
  /// made at connect(), which the target serves whenever Crown progresses there.
  [[nodiscard]] active_messages* messages() const noexcept { return messages_; }
  /// Progress of the transport and of the messages beside it; true when anything moved.
  bool progress() noexcept;
  /// The transport's progress without any MPI call (a progress thread below
  /// MPI_THREAD_MULTIPLE); true when anything moved.
  bool progress_without_mpi() noexcept { return transport_ && transport_->progress_without_mpi(); }
  [[nodiscard]] bool all_peers_shared() const noexcept {
    for (std::byte* p : peers_)
      if (!p) return false;
    return true;
  }

  free_list space;
  std::mutex mutex; ///< guards `space` against concurrent local allocations

private:
  void choose_transport(runtime_state& st);
  void use_active_messages(runtime_state& st);

  std::size_t size_;
  std::unique_ptr<shm_segment> segment_;
  std::byte* mine_ = nullptr;
  std::vector<std::byte*> peers_; ///< per world rank: slice base, or nullptr if not shared
  std::unique_ptr<backend> transport_;
  std::unique_ptr<active_messages> own_messages_; ///< without an am or ucx transport
  active_messages* messages_ = nullptr;
  std::string no_transport_reason_;
};

} // namespace crown::detail
