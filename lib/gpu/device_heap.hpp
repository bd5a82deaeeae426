// lib/gpu/device_heap.hpp — the device symmetric heap: one block of GPU memory per rank,
// mapped by the ranks of its host, a free list, Crown's stream and the device backend.
#pragma once
#include "../runtime/runtime_state.hpp"
#include "../transport/symmetric_heap.hpp"
#include "cuda_backend.hpp"
#include "device_memory.hpp"
#include "staged_device.hpp"
#include <algorithm>
#include <crown/mesh.hpp>
#include <cuda_runtime_api.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace crown::detail {

struct runtime_state;

/// Made once at start-up (collective over the world: every rank takes part, with or
/// without a GPU), destroyed before the runtime's communicators. Offsets are the same
/// on every member of an allocation; a rank on this host reaches another's block at
/// peer(rank, offset); a rank on another host is reached by staged transfers.
class device_heap {
public:
  /// `memory` was mapped over `group` (the ranks of this host that have a device heap),
  /// which the heap keeps until its memory is gone.
  /// Collective over `group`: throws on every member when Crown's stream or the view
  /// area cannot be made on one.
  device_heap(runtime_state& st, MPI_Comm group, std::unique_ptr<device_memory> memory, int device);
  ~device_heap();
  device_heap(const device_heap&) = delete;
  device_heap& operator=(const device_heap&) = delete;

  [[nodiscard]] int device() const noexcept { return device_; }
  /// Usable bytes: the smallest heap of the world (limit()), so that an allocation that
  /// fits on one rank fits on every rank.
  [[nodiscard]] std::size_t size() const noexcept { return space.capacity(); }
  /// Restricts the heap to its first `bytes` (before any allocation).
  void limit(std::size_t bytes) { space = free_list(std::min(bytes, memory_->size())); }
  [[nodiscard]] const char* mapping() const noexcept { return memory_->kind(); }
  [[nodiscard]] std::byte* local(std::uint64_t offset) const noexcept {
    return memory_->local() + offset;
  }
  [[nodiscard]] std::byte* peer(int world_rank, std::uint64_t offset) const noexcept {
    std::byte* base = peers_[static_cast<std::size_t>(world_rank)];
    return base ? base + offset : nullptr;
  }
  [[nodiscard]] int world_size() const noexcept { return static_cast<int>(peers_.size()); }
  /// Whether `p` lies in this rank's heap or a mapped peer's: memory this GPU's kernels
  /// reach (a kernel view's), told by address alone.
  [[nodiscard]] bool maps(const void* p) const noexcept {
    const auto* b = static_cast<const std::byte*>(p);
    const auto within = [&](const std::byte* base) {
      return base && b >= base && b < base + size();
    };
    if (within(memory_->local())) return true;
    for (const std::byte* base : peers_)
      if (within(base)) return true;
    return false;
  }
  /// Collective over the world (after the heap is agreed): which ranks have a device
  /// heap (`has_heap`, per world rank); makes the staged path when some of them are on
  /// other hosts and `am` carries requests.
  void reach_other_hosts(const std::vector<int>& has_heap, active_messages* am);
  /// The backend for `world_rank`, a rank this heap maps (same host); throws
  /// state_error naming `op`, both hosts and why for any other.
  [[nodiscard]] cuda_backend& backend_for(int world_rank, std::string_view op) const;
  /// nullptr for a rank this heap maps; the staged path for a rank on another host
  /// with a device heap; throws for others, as backend_for does.
  [[nodiscard]] staged_device* staged_for(int world_rank, std::string_view op) const;
  /// "self", "mapped", "staged" or "none" (device_link).
  [[nodiscard]] const char* link_to(int world_rank) const noexcept;
  [[nodiscard]] cudaStream_t stream() const noexcept { return backend_->stream(); }
  [[nodiscard]] cuda_backend& local_backend() const noexcept { return *backend_; }
  /// The widest pitch a 2-D copy on this heap's GPU is given (cuda_backend::max_pitch).
  [[nodiscard]] std::size_t max_copy_pitch() const noexcept { return backend_->max_pitch(); }

  /// The device table of base addresses for a kernel view of the block at `offset`
  /// over `ranks` (world ranks in image order), made on first use in the view area.
  void* view_table(std::uint64_t offset, const std::vector<int>& ranks, std::string_view what);
  /// Frees the view tables of the block at `offset` (the block is being freed).
  void forget_views(std::uint64_t offset) noexcept;

  free_list space;
  std::mutex mutex; ///< guards `space` and the view tables

private:
  /// `world_rank` is on another host with a device heap, and the staged path is up.
  [[nodiscard]] bool staged_to(std::size_t world_rank) const noexcept {
    return !peers_[world_rank] && world_rank < has_heap_.size() && has_heap_[world_rank] != 0 &&
           staged_;
  }

  comm_handle group_; ///< declared first: freed after the memory that meets on it
  int device_;
  std::unique_ptr<device_memory> memory_;
  std::vector<std::byte*> peers_;  ///< per world rank: mapped base, or nullptr
  std::vector<std::string> hosts_; ///< per world rank: host name, for errors
  std::vector<int> has_heap_;      ///< per world rank (reach_other_hosts)
  std::unique_ptr<cuda_backend> backend_;
  std::unique_ptr<staged_device> staged_; ///< ranks on other hosts; made last, gone first
  /// Kernel-view tables live in device memory reserved at start-up and are written from
  /// a page-locked mirror with cudaMemcpyAsync on Crown's stream: cudaMalloc, a
  /// synchronous cudaMemcpy and cudaFree would wait behind a user kernel spinning in
  /// wait_until (they synchronise with the device or the legacy default stream).
  class view_area {
  public:
    explicit view_area(std::size_t bytes); // on the current device
    ~view_area();
    view_area(const view_area&) = delete;
    view_area& operator=(const view_area&) = delete;
    /// A table holding `bases`, complete on the device when this returns.
    void* upload(const std::vector<std::byte*>& bases, cudaStream_t stream, std::string_view what);
    void release(void* table) noexcept;

  private:
    std::byte* device_ = nullptr;
    std::byte* staging_ = nullptr; ///< page-locked mirror of device_
    free_list slots_;
  };
  std::unique_ptr<view_area> views_area_;
  std::map<std::pair<std::uint64_t, std::vector<int>>, void*> views_;
};

/// The heap made at start-up; throws state_error naming `op` and why there is none
/// (no GPU visible, CROWN_GPU_HEAP_SIZE=0, no runtime).
device_heap& active_device_heap(std::string_view op);
/// The heap, or nullptr (with `why` set).
device_heap* find_device_heap(std::string* why = nullptr) noexcept;

/// "image I (rank R)" of mesh `m`.
std::string image_and_rank(const mesh& m, int image);

/// Collective over `comm` (the members of `m`): the lowest image whose `problem` is not
/// empty, with that problem (-1 and empty when no member has one), so that a check that
/// fails on one member throws on all instead of leaving the others waiting.
std::pair<int, std::string> first_member_problem(const mesh& m, MPI_Comm comm,
                                                 const std::string& problem,
                                                 const std::string& what);

/// Collective over `comm` (the members of `m`): every member has a device heap, or every
/// member throws state_error naming `op` and the first image without one, and why.
void require_device_heaps(const mesh& m, MPI_Comm comm, const std::string& op);

/// Drops what device collectives keep per mesh (NCCL communicators), before the heap.
void forget_device_collectives() noexcept;

} // namespace crown::detail
