// The device heap's same-host backend: copies into mapped peer memory, GPU atomics.
#include "cuda_backend.hpp"
#include "cuda_error.hpp"
#include "device_atomics.hpp"
#include "strided_copies.hpp"
#include <atomic>
#include <crown/detail/device_heap.hpp>
#include <crown/error.hpp>
#include <string>

namespace crown::detail {
namespace {

static_assert(static_cast<int>(atomic_op::load) == device_atomic_code::load &&
              static_cast<int>(atomic_op::add) == device_atomic_code::add &&
              static_cast<int>(atomic_op::bit_xor) == device_atomic_code::bit_xor &&
              static_cast<int>(atomic_op::compare_swap) == device_atomic_code::compare_swap);

/// A copy (or several) in flight: complete once the event recorded after them fired.
class cuda_op final : public async_op {
public:
  cuda_op(int target, cudaEvent_t e) noexcept : async_op(target), event_(e) {}
  ~cuda_op() override { (void)cudaEventDestroy(event_); }
  bool test_local() override { return test_remote(); }
  bool test_remote() override {
    if (done_) return true;
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    done_ = true; // an operation that has thrown counts as complete
    check_cuda(rc, "a device transfer to rank " + std::to_string(target()));
    return true;
  }

private:
  cudaEvent_t event_;
  bool done_ = false;
};

std::atomic<std::size_t> g_pitch_limit{0}; // 0: the device's own
std::atomic<std::uint64_t> g_row_splits{0};

std::string bytes_to(std::size_t bytes, int rank) {
  std::string s = std::to_string(bytes);
  s.append(" bytes, rank ").append(std::to_string(rank));
  return s;
}

/// One contiguous copy between `heap` (in `rank`'s mapped heap) and `packed`.
void copy_run(cudaStream_t stream, bool put, int rank, std::byte* heap, std::byte* packed,
              std::size_t bytes) {
  void* const dst = put ? static_cast<void*>(heap) : packed;
  const void* const src = put ? static_cast<const void*>(packed) : heap;
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream),
             std::string(put ? "cudaMemcpyAsync put (" : "cudaMemcpyAsync get (") +
                 bytes_to(bytes, rank) + ")");
}

} // namespace

cuda_backend::cuda_backend(int device, const std::byte* const* bases, int ranks)
    : device_(device), bases_(bases), ranks_(ranks) {
  const device_guard on(device_);
  int pitch = 0;
  check_cuda(cudaDeviceGetAttribute(&pitch, cudaDevAttrMaxPitch, device_),
             "cudaDeviceGetAttribute(cudaDevAttrMaxPitch)");
  max_pitch_ = static_cast<std::size_t>(pitch);
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  void* r = nullptr;
  if (const cudaError_t rc = cudaHostAlloc(&r, sizeof(std::uint64_t), cudaHostAllocMapped);
      rc != cudaSuccess) {
    (void)cudaStreamDestroy(stream_);
    check_cuda(rc, "cudaHostAlloc(atomic result word)");
  }
  result_ = static_cast<std::uint64_t*>(r);
}

cuda_backend::~cuda_backend() {
  (void)cudaStreamSynchronize(stream_);
  (void)cudaStreamDestroy(stream_);
  (void)cudaFreeHost(result_);
}

std::size_t cuda_backend::max_pitch() const noexcept {
  const std::size_t limit = g_pitch_limit.load(std::memory_order_relaxed);
  return limit ? std::min(limit, max_pitch_) : max_pitch_;
}

void set_device_copy_pitch_limit(std::size_t bytes) noexcept {
  g_pitch_limit.store(bytes, std::memory_order_relaxed);
}
void count_row_split() noexcept { g_row_splits.fetch_add(1, std::memory_order_relaxed); }
std::uint64_t device_row_split_copies() noexcept {
  return g_row_splits.load(std::memory_order_relaxed);
}

std::byte* cuda_backend::base_of(int rank) const {
  const std::byte* b = rank >= 0 && rank < ranks_ ? bases_[rank] : nullptr;
  if (!b)
    throw state_error("device transfer to rank " + std::to_string(rank),
                      "its device heap is not mapped on this rank");
  return const_cast<std::byte*>(b);
}

async_handle cuda_backend::finish(cudaStream_t stream, int rank) {
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  if (const cudaError_t rc = cudaEventRecord(e, stream); rc != cudaSuccess) {
    (void)cudaEventDestroy(e);
    check_cuda(rc, "cudaEventRecord(after a transfer to rank " + std::to_string(rank) + ")");
  }
  return async_handle(new cuda_op(rank, e));
}

async_handle cuda_backend::start(bool put, int rank, std::span<const run> runs, std::byte* packed) {
  return start_on(stream_, put, rank, runs, packed);
}

async_handle cuda_backend::start_on(cudaStream_t stream, bool put, int rank,
                                    std::span<const run> runs, std::byte* packed) {
  const device_guard on(device_);
  std::byte* const base = base_of(rank);
  const drain_on_failure drain(stream);
  enqueue(stream, put, base, rank, runs, packed);
  return finish(stream, rank);
}

void cuda_backend::copy(bool put, int rank, std::span<const run> runs, std::byte* packed) {
  const device_guard on(device_);
  std::byte* const base = base_of(rank);
  const drain_on_failure drain(stream_);
  enqueue(stream_, put, base, rank, runs, packed);
  check_cuda(cudaStreamSynchronize(stream_),
             std::string(put ? "device put" : "device get") + " to rank " + std::to_string(rank));
}

void cuda_backend::enqueue(cudaStream_t stream, bool put, std::byte* base, int rank,
                           std::span<const run> runs, std::byte* packed) {
  for (const run& r : runs) {
    copy_run(stream, put, rank, base + r.offset, packed, r.bytes);
    packed += r.bytes;
  }
}

async_handle cuda_backend::start_strided(cudaStream_t stream, bool put, int rank, const strided& s,
                                         std::byte* packed) {
  const device_guard on(device_);
  std::byte* const base = base_of(rank) + s.offset;
  const drain_on_failure drain(stream);
  const bool by_rows = for_each_copy_2d(s, max_pitch(), [&](const copy_2d& c) {
    std::byte* const heap = base + c.offset;
    const std::size_t bytes = c.width * c.height;
    if (c.height == 1) {
      copy_run(stream, put, rank, heap, packed, bytes);
    } else {
      void* const dst = put ? static_cast<void*>(heap) : packed;
      const void* const src = put ? static_cast<const void*>(packed) : heap;
      check_cuda(cudaMemcpy2DAsync(dst, put ? c.pitch : c.width, src, put ? c.width : c.pitch,
                                   c.width, c.height, cudaMemcpyDefault, stream),
                 std::string("cudaMemcpy2DAsync ") + (put ? "put (" : "get (") +
                     bytes_to(bytes, rank) + ", width " + std::to_string(c.width) + ", pitch " +
                     std::to_string(c.pitch) + ")");
    }
    packed += bytes;
  });
  if (by_rows) count_row_split();
  return finish(stream, rank);
}

std::uint64_t cuda_backend::atomic(int rank, std::uint64_t offset, atomic_op op, int width,
                                   bool floating, std::uint64_t operand, std::uint64_t compare) {
  const device_guard on(device_);
  std::byte* where = base_of(rank) + offset;
  const std::lock_guard lock(atomic_mutex_);
  const std::string what = "device atomic on rank " + std::to_string(rank) + " at offset " +
                           std::to_string(offset) + " (" + std::to_string(width) + " bytes)";
  check_cuda(launch_device_atomic(stream_, where, static_cast<int>(op), width, floating, operand,
                                  compare, result_),
             what);
  check_cuda(cudaStreamSynchronize(stream_), what);
  return *result_;
}

void cuda_backend::put_notify(int rank, std::span<const run> runs, const std::byte* packed,
                              std::uint64_t flag, std::int64_t add) {
  // Stream order: the atomic kernel starts after the copies completed.
  async_handle op = start(true, rank, runs, const_cast<std::byte*>(packed));
  (void)atomic(rank, flag, atomic_op::add, 8, false, static_cast<std::uint64_t>(add), 0);
  wait_remote(*op, "put_notify");
}

void cuda_backend::quiet() {
  const device_guard on(device_);
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(Crown's stream)");
}

} // namespace crown::detail
