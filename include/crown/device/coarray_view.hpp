// include/crown/device/coarray_view.hpp — what a.device() returns for coarray<T, N,
// memory_kind::cuda>: a trivially copyable view that kernels take by value. Its data
// layout is plain C++17 (host code builds it); its operations exist only under nvcc
// (include <crown/device.cuh> in .cu files).
#pragma once
#include <cstddef>
#include <type_traits>

#if defined(__CUDACC__)
#define CROWN_DEVICE __device__
#else
#define CROWN_DEVICE
#endif

namespace crown::device {

/// Comparisons of wait_until (as NVSHMEM_CMP_*).
enum class cmp { eq, ne, gt, ge, lt, le };

/// One image's block, reached through this rank's mapping of it.
template <typename T, std::size_t N>
struct image_block {
  T* data;
  std::size_t extents[N];
#if defined(__CUDACC__)
  /// Element (i, j, ...) in row-major order; no bounds check (this is a kernel).
  template <typename... I>
  CROWN_DEVICE T& operator()(I... index) const {
    static_assert(sizeof...(I) == N, "one index per dimension");
    const std::size_t i[] = {static_cast<std::size_t>(index)...};
    std::size_t linear = 0;
    for (std::size_t d = 0; d < N; ++d) linear = linear * extents[d] + i[d];
    return data[linear];
  }
#endif
};

/// Every image's block of one device coarray, for kernels: `v.on(img)(i, j) = x`,
/// `x = v.on(img)(i, j)`, `v(i, j)` for the local block, atomics on any image and
/// waits on local words. Images are those of the coarray's mesh, all on this rank's
/// host (a.device() throws otherwise). Stores into another image become visible to it
/// after crown::device::quiet() on the storing side and a synchronisation both sides
/// agree on: the storing kernel completed (its stream or the device synchronised:
/// crown::sync_all synchronises Crown's stream only) and then crown::sync_all, or a flag
/// the other side waits on.
template <typename T, std::size_t N>
struct coarray_view {
  static_assert(std::is_trivially_copyable_v<T>, "coarray elements are trivially copyable");
  T* const* bases;        ///< device array: each image's block, in image order
  std::size_t extents[N]; ///< of every block
  int this_image;
  int num_images;

#if defined(__CUDACC__)
  CROWN_DEVICE image_block<T, N> on(int image) const {
    image_block<T, N> b{bases[image], {}};
    for (std::size_t d = 0; d < N; ++d) b.extents[d] = extents[d];
    return b;
  }
  template <typename... I>
  CROWN_DEVICE T& operator()(I... index) const {
    return on(this_image)(index...);
  }
  /// Atomics on element `i` (linear, row-major) of `image`'s block (int32, int64,
  /// uint32, uint64; add also float and double). System scope: atomic with the host's
  /// image_ref atomics and with other processes' kernels.
  CROWN_DEVICE T atomic_add(int image, std::size_t i, T value) const;
  CROWN_DEVICE T compare_and_swap(int image, std::size_t i, T expected, T desired) const;
  CROWN_DEVICE T atomic_load(int image, std::size_t i) const;
  /// Waits until element `i` of the local block compares `c` to `value` (as
  /// nvshmem_signal_wait_until), then orders the loads after it; returns the value seen.
  CROWN_DEVICE T wait_until(std::size_t i, cmp c, T value) const;
#endif
};

static_assert(std::is_trivially_copyable_v<coarray_view<int, 2>>);

} // namespace crown::device
