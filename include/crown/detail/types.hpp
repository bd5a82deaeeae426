// include/crown/detail/types.hpp — element types: names for messages, tags for checks.
#pragma once
#include <complex>
#include <cstdint>
#include <string>
#include <type_traits>
#include <typeinfo>

namespace crown::detail {

template <typename T>
inline constexpr bool is_complex_v = false;
template <typename T>
inline constexpr bool is_complex_v<std::complex<T>> = true;

template <typename T>
std::string type_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, double>)
    return "double";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "int32_t";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "int64_t";
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return "uint32_t";
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return "uint64_t";
  else if constexpr (std::is_same_v<T, char>)
    return "char";
  else if constexpr (std::is_same_v<T, std::complex<float>>)
    return "complex<float>";
  else if constexpr (std::is_same_v<T, std::complex<double>>)
    return "complex<double>";
  else
    return std::to_string(sizeof(T)) + "-byte type";
}

/// Records the readable name of `tag` (the demangled type, and `dims` when above 1), so
/// that a mismatch between ranks names the types, not their hashes. Returns `tag`.
std::uint64_t register_type_tag(std::uint64_t tag, const std::type_info& type,
                                std::size_t dims) noexcept;
/// The name register_type_tag() recorded for a tag (or for tag >> 1, the form the
/// agreement checks compare), or "" when none.
std::string type_tag_name(std::uint64_t tag_or_half);

/// Identifies element type and rank in allocation checks (same binary on every rank).
/// Registered once per type, so that mismatches can be reported by name.
template <typename T, std::size_t N>
std::uint64_t type_tag() {
  // Shifted left, because the checks compare tag >> 1 (a positive long long): the
  // dimensions must survive that shift (2 and 3 once compared equal).
  static const std::uint64_t tag = register_type_tag(
      (static_cast<std::uint64_t>(typeid(T).hash_code()) * 31u + N) << 1, typeid(T), N);
  return tag;
}

/// Types whose elements support remote atomics: 4/8-byte integers, float, double.
template <typename T>
inline constexpr bool atomic_capable = (std::is_integral_v<T> &&
                                        (sizeof(T) == 4 || sizeof(T) == 8)) ||
                                       std::is_same_v<T, float> || std::is_same_v<T, double>;

} // namespace crown::detail
