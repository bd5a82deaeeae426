// Device heaps on other hosts: the origin's staged copies and the owner's server.
#include "staged_device.hpp"
#include "cuda_error.hpp"
#include "device_heap.hpp"
#include <crown/detail/device_heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <string>

namespace crown::detail {

staged_device::pinned staged_device::allocate_pinned(std::size_t bytes, const char* what) {
  void* p = nullptr;
  check_cuda(cudaHostAlloc(&p, bytes, cudaHostAllocDefault),
             std::string("cudaHostAlloc(") + std::to_string(bytes) + " bytes, " + what + ")");
  return pinned(static_cast<std::byte*>(p));
}

namespace {

/// Device or managed memory: bytes the host must not hand to MPI as they are (managed
/// memory may still be written by the stream's earlier kernels).
bool staged_through_slots(const void* p) {
  cudaPointerAttributes a{};
  if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

} // namespace

staged_device::staged_device(device_heap& heap, active_messages& am) : heap_(heap), am_(am) {
  const device_guard on(heap.device());
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags(device-heap server)");
  server_stream_.reset(s);
  server_memory_ = allocate_pinned(staged_request_bytes, "device-heap server");
  slot_memory_ = allocate_pinned(slot_bytes * slot_count, "staging slots");
  for (std::size_t k = 0; k < slot_count; ++k) {
    slots_[k] = slot_memory_.get() + k * slot_bytes;
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
               "cudaEventCreateWithFlags(staging slot)");
    copied_[k].reset(e);
  }
  set_device_server(
      [this](bool put, std::span<const run> runs, const std::function<void(std::byte*)>& network) {
        return serve(put, runs, network);
      });
}

staged_device::~staged_device() { set_device_server({}); }

am_status staged_device::serve(bool put, std::span<const run> runs,
                               const std::function<void(std::byte* host)>& network) {
  std::size_t total = 0;
  for (const run& r : runs) {
    if (r.offset > heap_.size() || r.bytes > heap_.size() - r.offset)
      return am_status::outside_device_heap;
    total += r.bytes;
  }
  // A CUDA failure is this rank's to report; the origin learns that its request failed.
  const auto on_gpu = [&](auto&& step) {
    try {
      const device_guard on(heap_.device());
      step();
      return true;
    } catch (const error& e) {
      log(log_level::error, "serving a device-heap request: ", e.what());
      return false;
    }
  };
  if (total > staged_request_bytes) return am_status::too_large;
  std::byte* host = server_memory_.get();
  if (put) network(host);
  const bool copied = on_gpu([&] {
    std::size_t at = 0;
    for (const run& r : runs) {
      std::byte* device = heap_.local(r.offset);
      check_cuda(cudaMemcpyAsync(put ? device : host + at, put ? host + at : device, r.bytes,
                                 put ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                 server_stream_.get()),
                 "cudaMemcpyAsync(" + std::to_string(r.bytes) + " bytes at device-heap offset " +
                     std::to_string(r.offset) + ")");
      at += r.bytes;
    }
    // Not a polling wait: this runs inside the serving thread's progress, which must not
    // progress again (active_messages serves one request at a time).
    check_cuda(cudaStreamSynchronize(server_stream_.get()),
               "cudaStreamSynchronize(device-heap server)");
  });
  if (!copied) return am_status::device_failed;
  if (!put) network(host);
  return am_status::ok;
}

void staged_device::transfer(bool put, int rank, std::span<const run> runs, std::byte* packed,
                             cudaStream_t stream) {
  const device_guard on(heap_.device());
  const std::string to = " rank " + std::to_string(rank) + "'s device heap";
  if (!staged_through_slots(packed)) { // host memory: after the stream's earlier work
    wait_for_gpu([&] { return cudaStreamQuery(stream); },
                 "cudaStreamQuery(before a staged transfer to" + to + ")");
    return staged_transfer(am_, put, rank, runs, packed, {});
  }
  const std::lock_guard lock(origin_mutex_);
  const drain_on_failure drain(stream); // slot copies enqueued before a failure
  const auto event_of = [&](std::byte* slot) {
    return copied_[static_cast<std::size_t>(slot - slot_memory_.get()) / slot_bytes].get();
  };
  const auto copy = [&](std::byte* dst, const std::byte* src, std::size_t bytes, std::byte* slot) {
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream),
               "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes, staged for" + to + ")");
    check_cuda(cudaEventRecord(event_of(slot), stream), "cudaEventRecord(staging slot)");
  };
  staging how;
  how.slots = slots_;
  how.slot_bytes = slot_bytes;
  how.fill = [&](std::byte* slot, std::size_t at, std::size_t bytes) {
    copy(slot, packed + at, bytes, slot);
  };
  how.drain = [&](std::byte* slot, std::size_t at, std::size_t bytes) {
    copy(packed + at, slot, bytes, slot);
  };
  how.finish = [&](std::byte* slot) {
    wait_for_gpu([&] { return cudaEventQuery(event_of(slot)); },
                 "cudaEventQuery(staged for" + to + ")");
  };
  staged_transfer(am_, put, rank, runs, packed, how);
}

} // namespace crown::detail
