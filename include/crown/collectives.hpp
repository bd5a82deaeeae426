// include/crown/collectives.hpp — co_sum, co_min, co_max, co_broadcast, co_reduce.
#pragma once
#include <complex>
#include <crown/detail/types.hpp>
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <crown/runtime.hpp>
#include <cstdint>
#include <cstring>
#include <mpi.h>
#include <span>
#include <type_traits>
#include <vector>

namespace crown {

namespace detail {

template <typename T>
MPI_Datatype mpi_datatype() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return MPI_INT32_T;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return MPI_UINT32_T;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, std::complex<float>>)
    return MPI_C_FLOAT_COMPLEX;
  else if constexpr (std::is_same_v<T, std::complex<double>>)
    return MPI_C_DOUBLE_COMPLEX;
  else if constexpr (std::is_same_v<T, char>)
    return MPI_CHAR;
  else
    return MPI_DATATYPE_NULL;
}

enum class reduction { sum, min, max };

/// acc[i] = acc[i] op next[i] for `count` elements: how the asynchronous collectives
/// fold floating-point data, one image after the other, in image order.
using fold_fn = void (*)(void* acc, const void* next, std::size_t count);
template <typename T, reduction Op>
void fold_elements(void* acc, const void* next, std::size_t count) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(next);
  for (std::size_t i = 0; i < count; ++i) {
    if constexpr (Op == reduction::sum)
      a[i] = a[i] + b[i];
    else if constexpr (Op == reduction::min)
      a[i] = b[i] < a[i] ? b[i] : a[i];
    else
      a[i] = a[i] < b[i] ? b[i] : a[i];
  }
}

/// Reduces `count` elements of `type` over the members of `m` into every image
/// (result_image < 0) or into one. Floating-point results are computed once and
/// broadcast, so every image holds bitwise the same value.
void co_reduce_builtin(const mesh& m, void* data, std::size_t count, MPI_Datatype type,
                       std::size_t elem_size, bool floating, reduction op, int result_image,
                       std::uint64_t tag, const char* name);
void co_broadcast_bytes(const mesh& m, void* data, std::size_t bytes, int source_image,
                        const char* name);
/// Gathers every image's bytes (image order) to all, after the argument check.
std::vector<std::byte> co_gather_bytes(const mesh& m, const void* data, std::size_t bytes,
                                       std::uint64_t tag, int result_image, const char* name);

template <typename T>
void co_builtin(const mesh& m, std::span<T> data, reduction op, int result_image,
                const char* name) {
  const MPI_Datatype type = mpi_datatype<T>();
  if (type == MPI_DATATYPE_NULL)
    throw argument_error(name, "no built-in reduction for " + type_name<T>() + "; use co_reduce");
  if constexpr (is_complex_v<T>) // MPI would fail on MPI_MIN/MPI_MAX of complex numbers
    if (op != reduction::sum) throw argument_error(name, "complex numbers are unordered");
  co_reduce_builtin(m, data.data(), data.size(), type, sizeof(T), !std::is_integral_v<T>, op,
                    result_image, type_tag<T, 1>(), name);
}

} // namespace detail

/// Sum over the images of `m`, element-wise, in place: into every image, or only into
/// `result_image` (the others' data is left as it was).
template <typename T>
void co_sum(const mesh& m, std::span<T> data, int result_image = -1) {
  detail::co_builtin(m, data, detail::reduction::sum, result_image, "co_sum");
}
template <typename T>
void co_min(const mesh& m, std::span<T> data, int result_image = -1) {
  detail::co_builtin(m, data, detail::reduction::min, result_image, "co_min");
}
template <typename T>
void co_max(const mesh& m, std::span<T> data, int result_image = -1) {
  detail::co_builtin(m, data, detail::reduction::max, result_image, "co_max");
}
/// Scalars.
template <typename T>
requires std::is_arithmetic_v<T>
void co_sum(const mesh& m, T& value, int result_image = -1) {
  co_sum(m, std::span<T>(&value, 1), result_image);
}
template <typename T>
requires std::is_arithmetic_v<T>
void co_min(const mesh& m, T& value, int result_image = -1) {
  co_min(m, std::span<T>(&value, 1), result_image);
}
template <typename T>
requires std::is_arithmetic_v<T>
void co_max(const mesh& m, T& value, int result_image = -1) {
  co_max(m, std::span<T>(&value, 1), result_image);
}

/// Copies `source_image`'s data to every image of `m`.
template <typename T>
void co_broadcast(const mesh& m, std::span<T> data, int source_image) {
  static_assert(std::is_trivially_copyable_v<T>);
  detail::co_broadcast_bytes(m, data.data(), data.size_bytes(), source_image, "co_broadcast");
}
template <typename T>
requires std::is_trivially_copyable_v<T>
void co_broadcast(const mesh& m, T& value, int source_image) {
  co_broadcast(m, std::span<T>(&value, 1), source_image);
}

/// Reduction with a user operation op(a, b) -> T, applied element-wise in image
/// order ((x0 op x1) op x2 ...), so it need not be commutative, and every image gets
/// bitwise the same result.
template <typename T, typename Op>
void co_reduce(const mesh& m, std::span<T> data, Op op, int result_image = -1) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto all = detail::co_gather_bytes(m, data.data(), data.size_bytes(),
                                           detail::type_tag<T, 1>(), result_image, "co_reduce");
  if (all.empty()) return; // not the result image
  const std::size_t n = data.size();
  std::vector<T> acc(n), next(n);
  std::memcpy(acc.data(), all.data(), n * sizeof(T));
  for (int img = 1; img < m.size(); ++img) {
    std::memcpy(next.data(), all.data() + static_cast<std::size_t>(img) * n * sizeof(T),
                n * sizeof(T));
    for (std::size_t i = 0; i < n; ++i) acc[i] = op(acc[i], next[i]);
  }
  std::memcpy(data.data(), acc.data(), n * sizeof(T));
}
template <typename T, typename Op>
requires std::is_trivially_copyable_v<T>
void co_reduce(const mesh& m, T& value, Op op, int result_image = -1) {
  co_reduce(m, std::span<T>(&value, 1), op, result_image);
}

} // namespace crown
