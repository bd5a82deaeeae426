// lib/gpu/x86_sum.hpp — a + b with the NaNs an x86 CPU gives, for the device fold: the
// host collectives' sums run on SSE/AVX, and a device co_sum must be bitwise theirs.
// Plain C++17, __host__ __device__ under nvcc: the host tests check it against the CPU.
#pragma once
#include "host_device.hpp"
#include <cstdint>

namespace crown::detail {

template <typename T>
struct nan_bits;
template <>
struct nan_bits<float> {
  using word = std::uint32_t;
  static constexpr word quiet = 0x0040'0000u;       ///< the quiet bit of the fraction
  static constexpr word default_nan = 0xffc0'0000u; ///< x86's invalid result: negative
};
template <>
struct nan_bits<double> {
  using word = std::uint64_t;
  static constexpr word quiet = 0x0008'0000'0000'0000u;
  static constexpr word default_nan = 0xfff8'0000'0000'0000u;
};

/// a + b as x86 adds it (addss/addsd and their vector forms with `a` the first
/// source, as the host fold `acc = acc + next` compiles): a NaN operand comes back
/// quieted with its sign and payload, `a`'s when both are NaN; an invalid sum (inf plus
/// -inf) is x86's default NaN. A GPU returns one canonical NaN for all of these.
template <typename T>
CROWN_HOST_DEVICE T x86_sum(T a, T b) {
  using bits = nan_bits<T>;
  using word = typename bits::word;
  if (a != a)
    return __builtin_bit_cast(T, static_cast<word>(__builtin_bit_cast(word, a) | bits::quiet));
  if (b != b)
    return __builtin_bit_cast(T, static_cast<word>(__builtin_bit_cast(word, b) | bits::quiet));
  const T sum = a + b;
  return sum != sum ? __builtin_bit_cast(T, bits::default_nan) : sum;
}

} // namespace crown::detail
