// include/crown/section.hpp — strided sections of an N-d block (Fortran a(1:n:2, 2:m)).
#pragma once
#include <array>
#include <crown/detail/heap.hpp>
#include <crown/error.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crown {

/// Indices begin, begin+stride, ... below end (half-open, 0-based; stride >= 1).
struct triplet {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t stride = 1;
  [[nodiscard]] std::size_t count() const noexcept {
    return end > begin ? (end - begin + stride - 1) / stride : 0;
  }
};

/// One triplet per dimension of an N-d block.
template <std::size_t N>
using section = std::array<triplet, N>;

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

/// Validates `s` against `extents` and lists the contiguous byte runs it covers in a
/// row-major block of `elem`-byte elements starting at heap `base`, in section order.
template <std::size_t N>
std::vector<run> section_runs(const section<N>& s, const std::array<std::size_t, N>& extents,
                              std::size_t elem, std::uint64_t base, const std::string& what) {
  for (std::size_t d = 0; d < N; ++d) {
    if (s[d].stride == 0 || s[d].stride > (std::size_t{1} << 62))
      throw argument_error(what + " section " + section_text(s),
                           "dimension " + std::to_string(d) + " has stride " +
                               std::to_string(static_cast<std::int64_t>(s[d].stride)) +
                               " (strides are >= 1)");
    if (s[d].begin > s[d].end || s[d].end > extents[d])
      throw argument_error(what + " section " + section_text(s),
                           "dimension " + std::to_string(d) + " range [" +
                               std::to_string(s[d].begin) + ", " + std::to_string(s[d].end) +
                               ") is outside the extent " + std::to_string(extents[d]));
  }
  std::vector<run> runs;
  std::array<std::size_t, N> counts{};
  std::size_t total = 1;
  for (std::size_t d = 0; d < N; ++d) total *= counts[d] = s[d].count();
  if (total == 0) return runs;
  // The innermost dimension is one run when its stride is 1, else one per element.
  const bool inner_contiguous = s[N - 1].stride == 1;
  const std::size_t run_elems = inner_contiguous ? counts[N - 1] : 1;
  std::array<std::size_t, N> index{};
  for (;;) {
    std::size_t offset = 0;
    for (std::size_t d = 0; d < N; ++d)
      offset = offset * extents[d] + s[d].begin + index[d] * s[d].stride;
    if (!runs.empty() && runs.back().offset + runs.back().bytes == base + offset * elem)
      runs.back().bytes += run_elems * elem; // neighbours merge (e.g. whole rows)
    else
      runs.push_back({base + offset * elem, run_elems * elem});
    // advance the multi-index (the innermost dimension by a whole run)
    std::size_t d = N;
    while (d-- > 0) {
      index[d] += (d == N - 1) ? run_elems : 1;
      if (index[d] < counts[d]) break;
      index[d] = 0;
      if (d == 0) return runs;
    }
  }
}

} // namespace detail
} // namespace crown
