// lib/transport/atomic_bits.hpp — a 4- or 8-byte value and the bits backends carry.
#pragma once
#include <cstdint>
#include <cstring>

namespace crown::detail {

template <typename T>
std::uint64_t bits_of(T v) {
  if constexpr (sizeof(T) == 4) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  } else {
    std::uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
}

template <typename T>
T from_bits(std::uint64_t b) {
  T v;
  if constexpr (sizeof(T) == 4) {
    const auto narrow = static_cast<std::uint32_t>(b);
    std::memcpy(&v, &narrow, 4);
  } else {
    std::memcpy(&v, &b, 8);
  }
  return v;
}

} // namespace crown::detail
