// Host-initiated atomics on device memory: one thread, system-scope atomics.
#include "device_atomics.hpp"
#include "kernel_launch.cuh"
#include <cuda/atomic>
#include <type_traits>

namespace crown::detail {
namespace {

template <typename T, typename U>
__device__ U apply(T* w, int op, U operand, U compare) {
  switch (op) {
  case load: // a plain load, not a read-modify-write
    return cuda::atomic_ref<U, cuda::thread_scope_system>(*reinterpret_cast<U*>(w))
        .load(cuda::std::memory_order_relaxed);
  case store:
  case swap:
    return atomicExch_system(reinterpret_cast<U*>(w), operand);
  case add:
    return atomicAdd_system(reinterpret_cast<U*>(w), operand);
  case bit_and:
    return atomicAnd_system(reinterpret_cast<U*>(w), operand);
  case bit_or:
    return atomicOr_system(reinterpret_cast<U*>(w), operand);
  case bit_xor:
    return atomicXor_system(reinterpret_cast<U*>(w), operand);
  default:
    return atomicCAS_system(reinterpret_cast<U*>(w), compare, operand);
  }
}

template <typename U>
__device__ U float_op(U* w, int op, U operand, U compare) {
  using F = typename std::conditional<sizeof(U) == 4, float, double>::type;
  switch (op) {
  case load:
    return cuda::atomic_ref<U, cuda::thread_scope_system>(*w).load(cuda::std::memory_order_relaxed);
  case store:
  case swap:
    return atomicExch_system(w, operand);
  case add: {
    const F old = atomicAdd_system(reinterpret_cast<F*>(w), __builtin_bit_cast(F, operand));
    return __builtin_bit_cast(U, old);
  }
  default:
    return atomicCAS_system(w, compare, operand);
  }
}

__global__ void atomic_kernel(void* where, int op, int width, bool floating, std::uint64_t operand,
                              std::uint64_t compare, std::uint64_t* result) {
  if (width == 4) {
    auto* w = static_cast<unsigned int*>(where);
    const auto a = static_cast<unsigned int>(operand), c = static_cast<unsigned int>(compare);
    *result = floating ? float_op(w, op, a, c) : apply(w, op, a, c);
  } else {
    auto* w = static_cast<unsigned long long*>(where);
    const auto a = static_cast<unsigned long long>(operand);
    const auto c = static_cast<unsigned long long>(compare);
    *result = floating ? float_op(w, op, a, c) : apply(w, op, a, c);
  }
  __threadfence_system();
}

} // namespace

cudaError_t launch_device_atomic(cudaStream_t stream, void* where, int op, int width, bool floating,
                                 std::uint64_t operand, std::uint64_t compare,
                                 std::uint64_t* result) {
  return launch_kernel(atomic_kernel, 1, 1, stream, where, op, width, floating, operand, compare,
                       result);
}

} // namespace crown::detail
