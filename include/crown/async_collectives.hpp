// include/crown/async_collectives.hpp — co_sum_async and friends: collectives that return
// a completion instead of blocking.
#pragma once
#include <crown/collectives.hpp>
#include <crown/completion.hpp>
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <span>
#include <type_traits>

namespace crown {

namespace detail {

/// Start the collective on the mesh's private communicator and return its completion
/// (empty when there is nothing to exchange). Implemented in lib/transport/async_collectives.
completion co_reduce_async(const mesh& m, void* data, std::size_t count, MPI_Datatype type,
                           std::size_t elem_size, reduction op, fold_fn fold, const char* name);
completion co_broadcast_async_bytes(const mesh& m, void* data, std::size_t bytes, int source_image,
                                    const char* name);

template <typename T, reduction Op>
completion co_builtin_async(const mesh& m, std::span<T> data, const char* name) {
  const MPI_Datatype type = mpi_datatype<T>();
  if (type == MPI_DATATYPE_NULL)
    throw argument_error(name, "no built-in reduction for " + type_name<T>());
  fold_fn fold = nullptr; // integers: exact in any order, one MPI_Iallreduce
  if constexpr (is_complex_v<T>) {
    if constexpr (Op != reduction::sum)
      throw argument_error(name, "complex numbers are unordered");
    else
      fold = &fold_elements<T, Op>;
  } else if constexpr (!std::is_integral_v<T>) {
    fold = &fold_elements<T, Op>;
  }
  return co_reduce_async(m, data.data(), data.size(), type, sizeof(T), Op, fold, name);
}

} // namespace detail

/// Starts co_sum of `data` over the images of `m` into every image and returns at once;
/// the result is in `data` once the completion is complete (wait(), or test() true).
/// Until then `data` must stay alive and untouched. Every image gets bitwise the same
/// result: integers exactly (one MPI_Iallreduce), floating point as one MPI_Iallgather
/// of every image's data that each image then folds in image order, ((x0 + x1) + x2) +
/// ..., the expression reduce_scatter computes (n times the data per image). Collective
/// over the members, started in the same order on each like every collective; several
/// may be in flight at once, beside blocking collectives on the same mesh. They advance
/// in test()/wait(), in every Crown wait and in the application's MPI calls.
template <typename T>
[[nodiscard]] completion co_sum_async(const mesh& m, std::span<T> data) {
  return detail::co_builtin_async<T, detail::reduction::sum>(m, data, "co_sum_async");
}
template <typename T>
[[nodiscard]] completion co_min_async(const mesh& m, std::span<T> data) {
  return detail::co_builtin_async<T, detail::reduction::min>(m, data, "co_min_async");
}
template <typename T>
[[nodiscard]] completion co_max_async(const mesh& m, std::span<T> data) {
  return detail::co_builtin_async<T, detail::reduction::max>(m, data, "co_max_async");
}

/// Starts a copy of `source_image`'s `data` to every image of `m` (one MPI_Ibcast) and
/// returns at once; `data` must stay alive and untouched until the completion is complete.
template <typename T>
[[nodiscard]] completion co_broadcast_async(const mesh& m, std::span<T> data, int source_image) {
  static_assert(std::is_trivially_copyable_v<T>);
  return detail::co_broadcast_async_bytes(m, data.data(), data.size_bytes(), source_image,
                                          "co_broadcast_async");
}

} // namespace crown
