// lib/gpu/strided_copies.hpp — a strided block as the 2-D copies that move it
// (cudaMemcpy2DAsync's shape), with rows one copy each where a pitch exceeds the
// device's limit. Plain C++: the host tests check the arithmetic without a GPU.
#pragma once
#include <algorithm>
#include <crown/detail/heap.hpp>
#include <cstddef>

namespace crown::detail {

/// `height` rows of `width` bytes, the block's rows `pitch` bytes apart from `offset`
/// (bytes past the block's first element); the packed side's rows are adjacent.
struct copy_2d {
  std::size_t offset = 0, width = 0, height = 1, pitch = 0;
};

/// Whether rows of `width` bytes, `pitch_a` and `pitch_b` apart on the two sides, fit
/// one cudaMemcpy2D: its pitches may not exceed cudaDevAttrMaxPitch (about 2 GiB, less
/// than a heap above that size may need).
constexpr bool fits_copy_2d(std::size_t width, std::size_t pitch_a, std::size_t pitch_b,
                            std::size_t max_pitch) noexcept {
  return std::max({width, pitch_a, pitch_b}) <= max_pitch;
}

/// Calls `each(copy_2d)` for the copies of strided block `s`, in the packed order. Rows
/// are the innermost dimension where its elements are adjacent (then a copy spans the
/// next dimension), else single elements (a copy spans the innermost dimension); the
/// dimensions outside a copy are looped over. Where a copy's rows would not fit one
/// cudaMemcpy2D (`max_pitch`), each row is its own copy of height 1 (a plain copy, which
/// has no such limit). An empty block has no copies. Returns whether rows were split so.
template <typename Each>
bool for_each_copy_2d(const strided& s, std::size_t max_pitch, Each&& each) {
  if (s.dims == 0 || std::find(s.count, s.count + s.dims, std::size_t{0}) != s.count + s.dims)
    return false;
  const std::size_t inner = s.dims - 1;
  const bool rows = s.stride[inner] == s.elem;
  copy_2d c;
  std::size_t spanned = inner; // the dimension a copy's rows step over, or s.dims: none
  if (rows) {
    c.width = s.count[inner] * s.elem;
    spanned = inner > 0 ? inner - 1 : s.dims;
  } else {
    c.width = s.elem;
  }
  c.height = spanned < s.dims ? s.count[spanned] : 1;
  c.pitch = spanned < s.dims ? s.stride[spanned] : c.width;
  std::size_t looped = spanned < s.dims ? spanned : inner; // dimensions [0, looped)
  const bool split = c.height > 1 && !fits_copy_2d(c.width, c.pitch, c.width, max_pitch);
  if (split) {
    c.height = 1; // the spanned dimension joins the loop
    c.pitch = c.width;
    looped = spanned + 1;
  }
  std::size_t index[3] = {0, 0, 0};
  for (;;) {
    copy_2d at = c;
    for (std::size_t d = 0; d < looped; ++d) at.offset += index[d] * s.stride[d];
    each(at);
    std::size_t d = looped;
    while (d > 0 && ++index[d - 1] == s.count[d - 1]) index[--d] = 0;
    if (d == 0) return split;
  }
}

} // namespace crown::detail
