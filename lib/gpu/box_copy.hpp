// lib/gpu/box_copy.hpp — dist_tensor's device box copies as three dimensions, the
// arithmetic both ways of copying them share (plain C++17 with __host__ __device__
// under nvcc: the host tests check it without a GPU, device_boxes.cu runs it).
#pragma once
#include "host_device.hpp"
#include <cstddef>
#include <cstdint>

namespace crown::detail {

/// A box of ex[0] x ex[1] x ex[2] elements [planes, rows, columns] between two row-major
/// blocks of extents fe and te, from fa to ta (leading dimensions of extent 1 where the
/// block has fewer than three).
struct box3 {
  const std::byte* from = nullptr;
  std::byte* to = nullptr;
  std::size_t fe[3] = {1, 1, 1}, fa[3] = {}, te[3] = {1, 1, 1}, ta[3] = {}, ex[3] = {1, 1, 1};

  CROWN_HOST_DEVICE std::size_t count() const { return ex[0] * ex[1] * ex[2]; }
  /// Element (z, y, x) of the box: its offset, in elements, in `from` and in `to`.
  CROWN_HOST_DEVICE std::size_t from_offset(std::size_t z, std::size_t y, std::size_t x) const {
    return ((fa[0] + z) * fe[1] + fa[1] + y) * fe[2] + fa[2] + x;
  }
  CROWN_HOST_DEVICE std::size_t to_offset(std::size_t z, std::size_t y, std::size_t x) const {
    return ((ta[0] + z) * te[1] + ta[1] + y) * te[2] + ta[2] + x;
  }
  /// The box's element `i` in row-major order, as (z, y, x).
  CROWN_HOST_DEVICE void position(std::size_t i, std::size_t& z, std::size_t& y,
                                  std::size_t& x) const {
    x = i % ex[2];
    y = i / ex[2] % ex[1];
    z = i / (ex[2] * ex[1]);
  }
  /// Every plane's rows are one run on both sides (or a plane is one row): a plane is
  /// one contiguous copy.
  CROWN_HOST_DEVICE bool planes_contiguous() const {
    return ex[1] == 1 || (ex[2] == fe[2] && ex[2] == te[2]);
  }
};

/// A box of `dims` (1 to 3) dimensions as a box3.
inline box3 make_box3(std::size_t dims, const void* from, const std::size_t* from_ext,
                      const std::size_t* from_at, void* to, const std::size_t* to_ext,
                      const std::size_t* to_at, const std::size_t* extent) {
  box3 b;
  b.from = static_cast<const std::byte*>(from);
  b.to = static_cast<std::byte*>(to);
  for (std::size_t d = 0; d < dims; ++d) {
    const std::size_t k = 3 - dims + d;
    b.fe[k] = from_ext[d];
    b.fa[k] = from_at[d];
    b.te[k] = to_ext[d];
    b.ta[k] = to_at[d];
    b.ex[k] = extent[d];
  }
  return b;
}

/// The widest word (8, 4, 2 or 1 bytes) that divides the element size and both blocks'
/// addresses: element addresses are the bases plus multiples of the element size, so
/// every word a kernel moves is then aligned.
inline std::size_t box_word_bytes(const box3& b, std::size_t elem) {
  const auto bits =
      reinterpret_cast<std::uintptr_t>(b.from) | reinterpret_cast<std::uintptr_t>(b.to);
  std::size_t word = 8;
  while (word > 1 && (elem % word != 0 || bits % word != 0)) word /= 2;
  return word;
}

} // namespace crown::detail
