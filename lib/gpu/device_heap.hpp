// lib/gpu/device_heap.hpp — the device symmetric heap: one block of GPU memory per rank,
// mapped by the ranks of its host, a free list, Crown's stream and the device backend.
#pragma once
#include "../runtime/runtime_state.hpp"
#include "../transport/symmetric_heap.hpp"
#include "cuda_backend.hpp"
#include "device_memory.hpp"
#include <cuda_runtime_api.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace crown::detail {

struct runtime_state;

/// Made once at start-up (collective over the world: every rank takes part, with or
/// without a GPU), destroyed before the runtime's communicators. Offsets are the same
/// on every member of an allocation; a rank on this host reaches another's block at
/// peer(rank, offset), a rank on another host has no mapping (part 2 adds a path).
class device_heap {
public:
  /// `memory` was mapped over `group` (the ranks of this host that have a device heap),
  /// which the heap keeps until its memory is gone.
  device_heap(runtime_state& st, MPI_Comm group, std::unique_ptr<device_memory> memory, int device);
  ~device_heap();
  device_heap(const device_heap&) = delete;
  device_heap& operator=(const device_heap&) = delete;

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] std::size_t size() const noexcept { return memory_->size(); }
  [[nodiscard]] const char* mapping() const noexcept { return memory_->kind(); }
  [[nodiscard]] std::byte* local(std::uint64_t offset) const noexcept {
    return memory_->local() + offset;
  }
  [[nodiscard]] std::byte* peer(int world_rank, std::uint64_t offset) const noexcept {
    std::byte* base = peers_[static_cast<std::size_t>(world_rank)];
    return base ? base + offset : nullptr;
  }
  [[nodiscard]] int world_size() const noexcept { return static_cast<int>(peers_.size()); }
  /// The backend for `world_rank`, chosen at start-up: the same-host mapping, or an
  /// error naming both hosts for a rank elsewhere.
  [[nodiscard]] cuda_backend& backend_for(int world_rank, std::string_view op) const;
  [[nodiscard]] cudaStream_t stream() const noexcept { return backend_->stream(); }
  [[nodiscard]] cuda_backend& local_backend() const noexcept { return *backend_; }

  /// The device table of base addresses for a kernel view of the block at `offset`
  /// over `ranks` (world ranks in image order), made on first use.
  void* view_table(std::uint64_t offset, const std::vector<int>& ranks, std::string_view what);
  /// Frees the view tables of the block at `offset` (the block is being freed).
  void forget_views(std::uint64_t offset) noexcept;

  free_list space;
  std::mutex mutex; ///< guards `space` and the view tables

private:
  comm_handle group_; ///< declared first: freed after the memory that meets on it
  int device_;
  std::unique_ptr<device_memory> memory_;
  std::vector<std::byte*> peers_;  ///< per world rank: mapped base, or nullptr
  std::vector<std::string> hosts_; ///< per world rank: host name, for errors
  std::unique_ptr<cuda_backend> backend_;
  struct device_buffer {
    void* p = nullptr;
    ~device_buffer();
  };
  std::map<std::pair<std::uint64_t, std::vector<int>>, std::unique_ptr<device_buffer>> views_;
};

/// The heap made at start-up; throws state_error naming `op` and why there is none
/// (no GPU visible, CROWN_GPU_HEAP_SIZE=0, no runtime).
device_heap& active_device_heap(std::string_view op);
/// The heap, or nullptr (with `why` set).
device_heap* find_device_heap(std::string* why = nullptr) noexcept;

} // namespace crown::detail
