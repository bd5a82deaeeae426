// include/crown/detail/checked.hpp — size arithmetic that cannot wrap around.
#pragma once
#include <cstddef>
#include <limits>
#include <span>

namespace crown::detail {

/// A byte count that does not fit 64 bits. It stands in for the true size on its way to
/// the heap, which refuses it (every member alike) as larger than any heap.
inline constexpr std::size_t size_overflow = std::numeric_limits<std::size_t>::max();

/// a x b, or size_overflow when the product does not fit (or either side already is).
[[nodiscard]] constexpr std::size_t saturating_mul(std::size_t a, std::size_t b) noexcept {
  std::size_t out = 0;
  if (a == size_overflow || b == size_overflow || __builtin_mul_overflow(a, b, &out))
    return size_overflow;
  return out;
}

/// a + b, or size_overflow.
[[nodiscard]] constexpr std::size_t saturating_add(std::size_t a, std::size_t b) noexcept {
  std::size_t out = 0;
  if (a == size_overflow || b == size_overflow || __builtin_add_overflow(a, b, &out))
    return size_overflow;
  return out;
}

/// The product of `extents` times `elem` bytes, or size_overflow (a block of 2^61
/// doubles once "allocated" 0 bytes, and its legal indices wrote into other blocks).
[[nodiscard]] constexpr std::size_t extents_bytes(std::span<const std::size_t> extents,
                                                  std::size_t elem) noexcept {
  std::size_t n = elem;
  for (std::size_t e : extents) {
    if (e == 0) return 0; // an empty block, whatever the other extents
    n = saturating_mul(n, e);
  }
  return n;
}

/// The number of elements of `extents`, or size_overflow.
[[nodiscard]] constexpr std::size_t element_count(std::span<const std::size_t> extents) noexcept {
  return extents_bytes(extents, 1);
}

} // namespace crown::detail
