// include/crown/detail/device_collectives.hpp — the non-template ABI under the
// collectives of device coarrays (crown/device_collectives.hpp). Implemented in lib/gpu/
// (CUDA builds; elsewhere a call throws, naming the missing CUDA).
#pragma once
#include <crown/collectives.hpp>
#include <crown/mesh.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

struct CUstream_st; // cudaStream_t is CUstream_st*: no CUDA header needed here

namespace crown {

/// How the collectives of device coarrays move data on a mesh (CROWN_GPU_COLLECTIVES):
/// Crown's kernels over the same-host peer mappings, NCCL, or the host collectives
/// over staged copies.
enum class device_path : std::uint8_t { peer, nccl, host };
[[nodiscard]] std::string_view to_string(device_path p) noexcept;

namespace detail {

/// Element types the device reductions compute on.
enum class device_number : std::uint8_t { i32, u32, i64, u64, f32, f64 };

template <typename T>
inline constexpr bool is_device_number =
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t> ||
    std::is_same_v<T, float> || std::is_same_v<T, double>;

template <typename T>
constexpr device_number device_number_of() {
  static_assert(is_device_number<T>,
                "device reductions take int32/int64/uint32/uint64/float/double");
  if constexpr (std::is_same_v<T, std::int32_t>)
    return device_number::i32;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return device_number::u32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return device_number::i64;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return device_number::u64;
  else if constexpr (std::is_same_v<T, float>)
    return device_number::f32;
  else
    return device_number::f64;
}

enum class device_collective_kind : std::uint8_t { reduce, broadcast, all_gather, reduce_scatter };

/// One collective over the device coarray blocks at `offset` (the same on every member).
struct device_collective {
  device_collective_kind kind = device_collective_kind::reduce;
  const mesh* team = nullptr;
  std::uint64_t offset = 0; ///< the block's first element taking part
  std::size_t count = 0;    ///< elements of the block taking part
  std::size_t elem = 0;     ///< bytes per element
  std::uint64_t type_tag = 0;
  device_number type = device_number::i32; ///< reduce, reduce_scatter
  reduction op = reduction::sum;           ///< reduce, reduce_scatter
  int image = -1;         ///< reduce: the result image (-1: all); broadcast: the source
  void* result = nullptr; ///< all_gather, reduce_scatter: where the result goes (any memory)
  std::size_t result_count = 0;
  CUstream_st* stream = nullptr; ///< nullptr: Crown's stream
  const char* name = "";
  /// The host path, after the lib staged this image's elements in `in` (count elements):
  /// the host collective of the same name; it writes `in` (reduce, broadcast) or `out`
  /// (result_count elements; all_gather, reduce_scatter), which the lib copies back.
  void (*host)(const device_collective& c, void* in, void* out) = nullptr;
};

/// Checks the arguments (naming the rank and values; with CROWN_CHECK=1 that every
/// member passed the same), then runs `c` on the mesh's path. Collective; returns once
/// the result is in place on every image that receives one.
void run_device_collective(const device_collective& c);

/// The path device collectives take on `m` (collective the first time per mesh, then
/// remembered until the runtime ends) and why, in one line.
device_path device_collectives_path(const mesh& m, std::string* why = nullptr);

} // namespace detail
} // namespace crown
