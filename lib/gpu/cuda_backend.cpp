// The device heap's same-host backend: copies into mapped peer memory, GPU atomics.
#include "cuda_backend.hpp"
#include "cuda_error.hpp"
#include "device_atomics.hpp"
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

std::string bytes_to(std::size_t bytes, int rank) {
  std::string s = std::to_string(bytes);
  s.append(" bytes, rank ").append(std::to_string(rank));
  return s;
}

} // namespace

cuda_backend::cuda_backend(int device, const std::byte* const* bases, int ranks)
    : device_(device), bases_(bases), ranks_(ranks) {
  const device_guard on(device_);
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
  enqueue(stream, put, rank, runs, packed);
  return finish(stream, rank);
}

void cuda_backend::copy(bool put, int rank, std::span<const run> runs, std::byte* packed) {
  const device_guard on(device_);
  enqueue(stream_, put, rank, runs, packed);
  check_cuda(cudaStreamSynchronize(stream_),
             std::string(put ? "device put" : "device get") + " to rank " + std::to_string(rank));
}

void cuda_backend::enqueue(cudaStream_t stream, bool put, int rank, std::span<const run> runs,
                           std::byte* packed) {
  std::byte* base = base_of(rank);
  for (const run& r : runs) {
    void* dst = put ? static_cast<void*>(base + r.offset) : packed;
    const void* src = put ? static_cast<const void*>(packed) : base + r.offset;
    check_cuda(cudaMemcpyAsync(dst, src, r.bytes, cudaMemcpyDefault, stream),
               std::string(put ? "cudaMemcpyAsync put (" : "cudaMemcpyAsync get (") +
                   bytes_to(r.bytes, rank) + ")");
    packed += r.bytes;
  }
}

async_handle cuda_backend::start_strided(cudaStream_t stream, bool put, int rank, const strided& s,
                                         std::byte* packed) {
  const device_guard on(device_);
  std::byte* base = base_of(rank) + s.offset;
  // Rows: the innermost dimension when contiguous (then a 2-D copy over the next one),
  // else single elements (a 2-D copy over the innermost dimension itself).
  const std::size_t inner = s.dims - 1;
  const bool rows = s.stride[inner] == s.elem;
  std::size_t width = s.elem, height = s.count[inner], pitch = s.stride[inner];
  std::size_t outer_dims = inner; // dimensions looped over on the host
  if (rows) {
    width = s.count[inner] * s.elem;
    height = inner > 0 ? s.count[inner - 1] : 1;
    pitch = inner > 0 ? s.stride[inner - 1] : width;
    outer_dims = inner > 0 ? inner - 1 : 0;
  }
  std::size_t outer[2] = {1, 1}, outer_stride[2] = {0, 0};
  for (std::size_t d = 0; d < outer_dims; ++d) {
    outer[2 - outer_dims + d] = s.count[d];
    outer_stride[2 - outer_dims + d] = s.stride[d];
  }
  for (std::size_t i = 0; i < outer[0]; ++i)
    for (std::size_t j = 0; j < outer[1]; ++j) {
      std::byte* heap = base + i * outer_stride[0] + j * outer_stride[1];
      const cudaError_t rc = put ? cudaMemcpy2DAsync(heap, pitch, packed, width, width, height,
                                                     cudaMemcpyDefault, stream)
                                 : cudaMemcpy2DAsync(packed, width, heap, pitch, width, height,
                                                     cudaMemcpyDefault, stream);
      check_cuda(rc, std::string("cudaMemcpy2DAsync ") + (put ? "put (" : "get (") +
                         bytes_to(width * height, rank) + ", width " + std::to_string(width) +
                         ", pitch " + std::to_string(pitch) + ")");
      packed += width * height;
    }
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
