// include/crown/section.hpp — strided sections of an N-d block (Fortran a(1:n:2, 2:m)).
#pragma once
#include <array>
#include <concepts>
#include <crown/detail/checked.hpp>
#include <crown/detail/heap.hpp>
#include <crown/error.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

namespace crown {

/// Indices begin, begin+stride, ... below end (half-open, 0-based; stride >= 1).
struct triplet {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t stride = 1;
  /// Indices selected (0 for an invalid stride of 0); cannot overflow, whatever the values.
  [[nodiscard]] std::size_t count() const noexcept {
    return end > begin && stride > 0 ? (end - begin - 1) / stride + 1 : 0;
  }
};

/// One triplet per dimension of an N-d block, written with one brace per triplet:
///   a.on(img).get({{0, rows, 1}, {0, cols, 3}}, buffer);   // a(0:rows, 0:cols:3)[img]
/// (the older triple-brace spelling {{{0, rows, 1}, {0, cols, 3}}} still works).
template <std::size_t N>
struct section : std::array<triplet, N> {
  section() = default;
  section(const triplet& d0) requires(N == 1) : std::array<triplet, N>{d0} {}
  section(const triplet& d0, const triplet& d1) requires(N == 2) : std::array<triplet, N>{d0, d1} {}
  section(const triplet& d0, const triplet& d1, const triplet& d2) requires(N == 3)
      : std::array<triplet, N>{d0, d1, d2} {}
  /// The triple-brace form: {{{b, e, s}, ...}} reaches this through a built-in array.
  section(const triplet (&d)[N]) {
    for (std::size_t i = 0; i < N; ++i) (*this)[i] = d[i];
  }
  /// From a std::array<triplet, N> (what section<N> was before it became a type).
  template <typename A>
  requires std::same_as<A, std::array<triplet, N>> section(const A& a)
      : std::array<triplet, N>(a) {}
};

/// The whole extent of a dimension, for use in a section.
inline triplet all(std::size_t extent) { return {0, extent, 1}; }

namespace detail {

template <std::size_t N>
std::string section_text(const section<N>& s) {
  std::string t = "[";
  for (std::size_t d = 0; d < N; ++d) {
    if (d) t += ", ";
    t += std::to_string(s[d].begin);
    t += ':';
    t += std::to_string(s[d].end);
    if (s[d].stride != 1) {
      t += ':';
      t += std::to_string(s[d].stride);
    }
  }
  t += ']';
  return t;
}

/// Validates `s` against `extents` and describes it in a row-major block of
/// `elem`-byte elements, `block`. Every product is checked: a section of a block whose
/// extents overflow, or whose last byte would lie outside the block, is refused.
/// `what()` names the operation in an error; it is called only for one (no string is
/// built on the path of a transfer).
template <std::size_t N, typename What>
strided section_layout(const section<N>& s, const std::array<std::size_t, N>& extents,
                       std::size_t elem, const heap_block& block, const What& what) {
  strided out;
  out.elem = elem;
  out.dims = N;
  out.offset = block.offset;
  std::size_t pitch = elem; // bytes between consecutive indices of dimension d
  std::size_t last = elem;  // bytes from the first element to the end of the last
  bool empty = false;
  for (std::size_t d = N; d-- > 0;) {
    if (s[d].stride == 0 || s[d].stride > (std::size_t{1} << 62))
      throw argument_error(what() + " section " + section_text(s),
                           "dimension " + std::to_string(d) + " has stride " +
                               std::to_string(static_cast<std::int64_t>(s[d].stride)) +
                               " (strides are >= 1)");
    if (s[d].begin > s[d].end || s[d].end > extents[d])
      throw argument_error(what() + " section " + section_text(s),
                           "dimension " + std::to_string(d) + " range [" +
                               std::to_string(s[d].begin) + ", " + std::to_string(s[d].end) +
                               ") is outside the extent " + std::to_string(extents[d]));
    out.count[d] = s[d].count();
    // A stride beyond the extent selects one index at most: its byte stride is unused.
    out.stride[d] = out.count[d] > 1 ? saturating_mul(pitch, s[d].stride) : pitch;
    out.offset += saturating_mul(pitch, s[d].begin);
    if (out.count[d] > 0)
      last = saturating_add(last, saturating_mul(out.count[d] - 1, out.stride[d]));
    else
      empty = true;
    pitch = saturating_mul(pitch, extents[d]);
  }
  const std::size_t first = out.offset - block.offset;
  if (pitch > block.bytes || (!empty && (first > block.bytes || last > block.bytes - first)))
    throw argument_error(what() + " section " + section_text(s),
                         "it reaches outside the block of " + std::to_string(block.bytes) +
                             " bytes (extents of " +
                             (pitch == size_overflow ? std::string("more than 2^64 bytes")
                                                     : std::to_string(pitch) + " bytes") +
                             ")");
  return out;
}

} // namespace detail
} // namespace crown
