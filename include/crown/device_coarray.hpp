// include/crown/device_coarray.hpp — coarray<T, N, memory_kind::cuda>: an N-d block in
// GPU memory on every image, in the device symmetric heap (CROWN_GPU_HEAP_SIZE).
// Included by coarray.hpp; the same API as host coarrays, plus stream-ordered
// transfers and a kernel view (device()).
#pragma once
#include <crown/coarray.hpp>
#include <crown/detail/device_heap.hpp>
#include <crown/device/coarray_view.hpp>

namespace crown {

/// How this rank reaches `world_rank`'s device heap: "self"; "mapped" (same host: CUDA
/// VMM or IPC mapping, copies and kernels straight into it); "staged" (another host:
/// requests its owner serves, the bytes through page-locked host memory in pipelined
/// chunks); "none" (no device heap there or here). crown-info prints it per rank.
[[nodiscard]] inline const char* device_link(int world_rank) noexcept {
  return detail::device_link_to(world_rank);
}

/// A remote reference to one image's device block: `a.on(img)`. Sources and
/// destinations may be host or device memory. Blocking transfers return once the data
/// is at the target (put) or here (get); the *_async ones return a completion (local
/// and remote completion coincide: the copy writes the target's memory itself).
/// Streams, one rule for every overload (docs/memory-model.md): without a stream, or
/// with `stream` nullptr, a transfer runs on Crown's own stream, and sync_all, quiet and
/// event::post complete it; with a stream handle (cudaStreamLegacy or
/// cudaStreamPerThread for a default stream: a library cannot tell which one a caller's
/// 0 means) it is enqueued on that stream and completes with it (its completion, or a
/// synchronisation of that stream), never from sync_all, which would also wait for a
/// kernel queued before it. Images on other hosts are reached by staged transfers
/// (device_link): puts and gets only, each complete when its call returns (the async
/// ones too; their device copies still follow the stream's earlier work); atomics,
/// put_notify with a device flag and kernel views reach same-host images only.
template <typename T, std::size_t N>
class image_ref<T, N, memory_kind::cuda>
    : public detail::image_ref_common<T, N, memory_kind::cuda> {
  using common = detail::image_ref_common<T, N, memory_kind::cuda>;
  using common::a_;
  using common::rank_;

public:
  using typename common::index_type;

  void put(std::span<const T> src) const {
    this->check_count(src.size(), "put");
    detail::device_put(rank_, a_->block().offset, src.data(), src.size_bytes());
  }
  void get(std::span<T> dst) const {
    this->check_count(dst.size(), "get");
    detail::device_get(rank_, a_->block().offset, dst.data(), dst.size_bytes());
  }
  /// Enqueued on `stream` (a cudaStream_t; nullptr: Crown's stream): ordered after the
  /// stream's earlier work (a kernel that produced `src`), before its later work.
  /// `src`/`dst` are device or page-locked host memory when a stream is given.
  [[nodiscard]] completion put_async(std::span<const T> src, CUstream_st* stream = nullptr) const {
    return start(true, const_cast<T*>(src.data()), src.size(), stream, "put_async");
  }
  [[nodiscard]] completion get_async(std::span<T> dst, CUstream_st* stream = nullptr) const {
    return start(false, dst.data(), dst.size(), stream, "get_async");
  }

  void put(const index_type& i, const T& value) const {
    detail::device_put(rank_, this->element_offset(i, "put"), &value, sizeof(T));
  }
  [[nodiscard]] T get(const index_type& i) const {
    T value;
    detail::device_get(rank_, this->element_offset(i, "get"), &value, sizeof(T));
    return value;
  }
  /// A strided section; `src`/`dst` hold its elements packed in row-major order.
  void put(const section<N>& s, std::span<const T> src) const {
    detail::device_put_strided(rank_, this->layout(s, src.size(), "put"), src.data());
  }
  void get(const section<N>& s, std::span<T> dst) const {
    detail::device_get_strided(rank_, this->layout(s, dst.size(), "get"), dst.data());
  }
  [[nodiscard]] completion put_async(const section<N>& s, std::span<const T> src,
                                     CUstream_st* stream = nullptr) const {
    completion c;
    detail::device_start_strided(true, rank_, this->layout(s, src.size(), "put_async"),
                                 const_cast<T*>(src.data()), stream, c);
    return c;
  }
  [[nodiscard]] completion get_async(const section<N>& s, std::span<T> dst,
                                     CUstream_st* stream = nullptr) const {
    completion c;
    detail::device_start_strided(false, rank_, this->layout(s, dst.size(), "get_async"), dst.data(),
                                 stream, c);
    return c;
  }

  // Atomics (image_ref_common's named ones) are executed by the GPU (system scope):
  // atomic with each other and with kernels' atomics through device() views, the
  // owner's too.

  /// Put-with-notify into a device flag: puts `src`, then adds `add` to the int64
  /// element `flag` of `flags` on the same image, once the data is there (a kernel
  /// there waits with view.wait_until(flag, cmp::ge, n)).
  template <std::size_t M>
  void put_signal(std::span<const T> src, const coarray<std::int64_t, M, memory_kind::cuda>& flags,
                  const std::array<std::size_t, M>& flag, std::int64_t add = 1) const {
    this->check_count(src.size(), "put_signal");
    const std::uint64_t word =
        flags.on(flags.team().index_of(rank_)).element_offset(flag, "put_signal (flag)");
    detail::device_put_notify(rank_, a_->block().offset, src.data(), src.size_bytes(), word, add,
                              true, false);
  }

private:
  friend class detail::coarray_common<T, N, memory_kind::cuda>;
  friend class detail::image_ref_common<T, N, memory_kind::cuda>;
  friend void put_notify<T, N, memory_kind::cuda>(const image_ref& target, std::span<const T> src,
                                                  event& notify);
  image_ref(const coarray<T, N, memory_kind::cuda>* a, int image, int rank)
      : common(a, image, rank) {}

  completion start(bool put, T* buffer, std::size_t n, CUstream_st* stream, const char* op) const {
    this->check_count(n, op);
    completion c;
    detail::device_start(put, rank_, a_->block().offset, buffer, n * sizeof(T), stream, c);
    return c;
  }
  T atomic(const index_type& i, detail::atomic_op op, T operand, T compare = T{}) const {
    using bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const std::uint64_t result = detail::device_atomic(
        rank_, this->element_offset(i, "atomic"), op, sizeof(T), std::is_floating_point_v<T>,
        std::bit_cast<bits_t>(operand), std::bit_cast<bits_t>(compare));
    return std::bit_cast<T>(static_cast<bits_t>(result));
  }
};

/// An N-d block of T in device memory on every image of a mesh: the device symmetric
/// heap of each member's GPU. Construction and destruction are collective over the
/// members; elements start zeroed. data() is the local block's device pointer (for
/// kernels and cudaMemcpy); device() is the view kernels use to reach every image of
/// this host; on(image) moves data from the host side. A member without a device heap
/// (no GPU, CROWN_GPU_HEAP_SIZE=0, built without CUDA) makes construction throw on
/// every member, naming it and why.
template <typename T, std::size_t N>
class coarray<T, N, memory_kind::cuda> : public detail::coarray_common<T, N, memory_kind::cuda> {
  using common = detail::coarray_common<T, N, memory_kind::cuda>;
  using common::block_;
  using common::extents_;
  using common::mesh_;

public:
  using typename common::extents_type;

  coarray(const mesh& m, const extents_type& extents) : common(m, extents) {}
  coarray(const mesh& m, std::size_t n) requires(N == 1) : common(m, extents_type{n}) {}
  explicit coarray(const extents_type& extents) : common(crown::world(), extents) {}
  explicit coarray(std::size_t n) requires(N == 1) : common(crown::world(), extents_type{n}) {}
  friend void swap(coarray& a, coarray& b) noexcept { a.swap(b); }

  /// The kernel view of every image's block (see crown/device.cuh). Throws
  /// argument_error when an image lies on another host: kernels reach this host only.
  [[nodiscard]] device::coarray_view<T, N> device() const {
    device::coarray_view<T, N> v{};
    v.bases = static_cast<T* const*>(
        detail::device_view_table(mesh_, block_.offset, "device() of " + this->name()));
    for (std::size_t d = 0; d < N; ++d) v.extents[d] = extents_[d];
    v.this_image = mesh_.rank();
    v.num_images = mesh_.size();
    return v;
  }
};

} // namespace crown
