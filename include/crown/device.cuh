// include/crown/device.cuh — Crown inside CUDA kernels: the operations of coarray_view
// (a.device()), fence, quiet and wait_until. Header-only; nvcc only (C++17 or later).
#pragma once
#if !defined(__CUDACC__)
#error                                                                                             \
    "<crown/device.cuh> is for CUDA sources compiled by nvcc; host code includes <crown/device/coarray_view.hpp>"
#endif
#include <crown/device/coarray_view.hpp>
#include <cuda/atomic>

namespace crown::device {

/// Orders this thread's earlier stores to any image before its later ones
/// (as nvshmem_fence).
__device__ inline void fence() { __threadfence_system(); }
/// Makes this thread's earlier stores to any image visible to every process of the host
/// (as nvshmem_quiet): peers' blocks are mapped memory, so a system fence completes them.
__device__ inline void quiet() { __threadfence_system(); }

namespace detail {

template <typename T>
__device__ bool compare(T seen, cmp c, T value) {
  switch (c) {
  case cmp::eq:
    return seen == value;
  case cmp::ne:
    return seen != value;
  case cmp::gt:
    return seen > value;
  case cmp::ge:
    return seen >= value;
  case cmp::lt:
    return seen < value;
  default:
    return seen <= value;
  }
}

/// The unsigned word type of T's size, for atomicCAS.
template <typename T>
using word_t = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;

template <typename T>
__device__ T atomic_add(T* where, T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics need 4- or 8-byte elements");
  if constexpr (std::is_floating_point_v<T>) {
    return atomicAdd_system(where, value);
  } else { // integers: two's complement addition on the unsigned word of T's size (a
    // 64-bit add on a 4-byte char32_t or wchar_t would carry into its neighbour)
    using W = word_t<T>;
    return static_cast<T>(atomicAdd_system(reinterpret_cast<W*>(where), static_cast<W>(value)));
  }
}

template <typename T>
__device__ T atomic_cas(T* where, T expected, T desired) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics need 4- or 8-byte elements");
  using W = word_t<T>;
  const W seen = atomicCAS_system(reinterpret_cast<W*>(where), __builtin_bit_cast(W, expected),
                                  __builtin_bit_cast(W, desired));
  return __builtin_bit_cast(T, seen);
}

} // namespace detail

/// Waits until `*flag` compares `c` to `value`; then orders later loads after the wait.
template <typename T>
__device__ T wait_until(const T* flag, cmp c, T value) {
  T seen;
  while (!detail::compare(seen = *const_cast<const volatile T*>(flag), c, value)) {}
  __threadfence_system();
  return seen;
}

template <typename T, std::size_t N>
__device__ T coarray_view<T, N>::atomic_add(int image, std::size_t i, T value) const {
  return detail::atomic_add(bases[image] + i, value);
}

template <typename T, std::size_t N>
__device__ T coarray_view<T, N>::compare_and_swap(int image, std::size_t i, T expected,
                                                  T desired) const {
  return detail::atomic_cas(bases[image] + i, expected, desired);
}

template <typename T, std::size_t N>
__device__ T coarray_view<T, N>::atomic_load(int image, std::size_t i) const {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics need 4- or 8-byte elements");
  // A plain load, relaxed as the other view atomics (a compare-and-swap would be a write:
  // slower, and an error on memory mapped read-only).
  return cuda::atomic_ref<T, cuda::thread_scope_system>(bases[image][i])
      .load(cuda::std::memory_order_relaxed);
}

template <typename T, std::size_t N>
__device__ T coarray_view<T, N>::wait_until(std::size_t i, cmp c, T value) const {
  return crown::device::wait_until(bases[this_image] + i, c, value);
}

} // namespace crown::device
