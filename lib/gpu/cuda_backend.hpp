// lib/gpu/cuda_backend.hpp — the device heap's backend for ranks of this host: copies
// into the peers' mapped device heaps (cudaMemcpyAsync) and GPU atomics on them.
#pragma once
#include "../transport/backend.hpp"
#include <cuda_runtime_api.h>
#include <mutex>

namespace crown::detail {

/// Counts a block or a box whose 2-D copies went a row each (device_row_split_copies).
void count_row_split() noexcept;

/// Implements the backend contract over mapped device memory. Transfers are
/// asynchronous copies on Crown's stream (or the caller's) that complete when an event
/// recorded after them fires: local and remote completion coincide, since the copy
/// writes the target's memory itself. `packed` may be host or device memory
/// (cudaMemcpyDefault; pageable host memory makes the copy synchronous). Atomics are a
/// one-thread kernel with system-scope atomics, so they are atomic with kernels' ones.
class cuda_backend final : public backend {
public:
  /// `bases`: per world rank, the mapped device heap or nullptr.
  cuda_backend(int device, const std::byte* const* bases, int ranks);
  ~cuda_backend() override;
  cuda_backend(const cuda_backend&) = delete;
  cuda_backend& operator=(const cuda_backend&) = delete;

  [[nodiscard]] const char* name() const noexcept override { return "cuda"; }
  async_handle start(bool put, int rank, std::span<const run> runs, std::byte* packed) override;
  std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width, bool floating,
                       std::uint64_t operand, std::uint64_t compare) override;
  void put_notify(int rank, std::span<const run> runs, const std::byte* packed, std::uint64_t flag,
                  std::int64_t add) override;
  void fence() override {} // one stream: copies start in order
  void quiet() override;
  bool progress() noexcept override { return false; }

  /// start() on `stream`, returning the operation in flight.
  async_handle start_on(cudaStream_t stream, bool put, int rank, std::span<const run> runs,
                        std::byte* packed);
  /// A blocking transfer on Crown's stream: the copies, then a stream synchronisation
  /// (no event: the cudaMemcpyAsync + synchronise floor).
  void copy(bool put, int rank, std::span<const run> runs, std::byte* packed);
  /// A strided block as 2-D copies (cudaMemcpy2DAsync; a row each where a pitch exceeds
  /// max_pitch()), on `stream`.
  async_handle start_strided(cudaStream_t stream, bool put, int rank, const strided& s,
                             std::byte* packed);
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  [[nodiscard]] int device() const noexcept { return device_; }
  /// The widest pitch one cudaMemcpy2D accepts on this GPU (cudaDevAttrMaxPitch), or
  /// what set_device_copy_pitch_limit lowered it to.
  [[nodiscard]] std::size_t max_pitch() const noexcept;

private:
  std::byte* base_of(int rank) const;
  void enqueue(cudaStream_t stream, bool put, std::byte* base, int rank, std::span<const run> runs,
               std::byte* packed);
  async_handle finish(cudaStream_t stream, int rank);

  int device_;
  const std::byte* const* bases_;
  int ranks_;
  std::size_t max_pitch_ = 0;
  cudaStream_t stream_ = nullptr;
  std::uint64_t* result_ = nullptr; ///< pinned host word the atomic kernel writes
  std::mutex atomic_mutex_;         ///< one atomic at a time uses result_
};

} // namespace crown::detail
