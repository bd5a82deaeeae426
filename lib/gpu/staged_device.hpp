// lib/gpu/staged_device.hpp — device heaps on other hosts, where MPI cannot read GPU
// memory: transfers staged through page-locked host memory in pipelined chunks, and this
// rank's server for the requests other hosts send to its device heap.
#pragma once
#include "../transport/staged_transfer.hpp"
#include <array>
#include <cuda_runtime_api.h>
#include <memory>
#include <mutex>

namespace crown::detail {

class device_heap;

class staged_device {
public:
  /// Chunks of a staged transfer, and how many are in flight at once.
  static constexpr std::size_t slot_bytes = std::size_t{1} << 20;
  static constexpr std::size_t slot_count = 4;

  /// Installs this rank's server for `heap` (its requests arrive over `am`) and makes
  /// every page-locked buffer now, at start-up: allocating one later, while serving,
  /// would synchronise with the device behind a kernel that may be waiting for the data.
  staged_device(device_heap& heap, active_messages& am);
  /// Removes the server (waiting for a request it is serving), frees what it holds.
  ~staged_device();
  staged_device(const staged_device&) = delete;
  staged_device& operator=(const staged_device&) = delete;

  /// A blocking put or get between `packed` and `runs` of `rank`'s device heap, after
  /// `stream`'s earlier work. Device (and managed) memory goes through the slots with
  /// copies on `stream`; host memory is sent as it is once the stream has drained. Every
  /// wait on the GPU serves other ranks' requests meanwhile. Returns once the bytes are
  /// at the target (put) or in `packed` (get).
  void transfer(bool put, int rank, std::span<const run> runs, std::byte* packed,
                cudaStream_t stream);

private:
  struct free_host {
    void operator()(std::byte* p) const noexcept { (void)cudaFreeHost(p); }
  };
  struct destroy_event {
    void operator()(CUevent_st* e) const noexcept { (void)cudaEventDestroy(e); }
  };
  struct destroy_stream {
    void operator()(CUstream_st* s) const noexcept { (void)cudaStreamDestroy(s); }
  };
  using pinned = std::unique_ptr<std::byte, free_host>;
  using event = std::unique_ptr<CUevent_st, destroy_event>;
  static pinned allocate_pinned(std::size_t bytes, const char* what);

  am_status serve(bool put, std::span<const run> runs,
                  const std::function<void(std::byte* host)>& network);

  device_heap& heap_;
  active_messages& am_;
  std::mutex origin_mutex_; ///< one staged transfer at a time uses the slots
  pinned slot_memory_;
  std::array<std::byte*, slot_count> slots_{};
  std::array<event, slot_count> copied_;
  // The server's side: one thread serves requests at a time (active_messages); a
  // request holds at most staged_request_bytes.
  std::unique_ptr<CUstream_st, destroy_stream> server_stream_;
  pinned server_memory_;
};

} // namespace crown::detail
