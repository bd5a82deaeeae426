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

/// Identifies element type and rank in allocation checks (same binary on every rank).
template <typename T, std::size_t N>
std::uint64_t type_tag() {
  return static_cast<std::uint64_t>(typeid(T).hash_code()) * 31u + N;
}

/// Types whose elements support remote atomics: 4/8-byte integers, float, double.
template <typename T>
inline constexpr bool atomic_capable = (std::is_integral_v<T> &&
                                        (sizeof(T) == 4 || sizeof(T) == 8)) ||
                                       std::is_same_v<T, float> || std::is_same_v<T, double>;

} // namespace crown::detail
