// fortran_bindings/caf/caf_walk.hpp — the elements one side of a transfer touches (a
// "walk", in Fortran's array element order), built from gfortran's descriptor, its
// vector subscripts or a reference chain; and moving them between a packed buffer
// here and the image that holds the coarray.
#pragma once
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include <cstddef>
#include <vector>

namespace crown::caf {

/// One dimension: `count` byte offsets `step` apart, or the listed ones (a vector
/// subscript).
struct axis {
  std::ptrdiff_t step = 0;
  std::size_t count = 1;
  std::vector<std::ptrdiff_t> list;
  [[nodiscard]] std::size_t size() const noexcept { return list.empty() ? count : list.size(); }
  [[nodiscard]] std::ptrdiff_t at(std::size_t i) const noexcept {
    return list.empty() ? step * static_cast<std::ptrdiff_t>(i) : list[i];
  }
};

struct walk {
  std::ptrdiff_t first = 0; ///< bytes from the start of the memory walked
  element elem;
  std::vector<axis> axes; ///< axes[0] varies fastest

  [[nodiscard]] std::size_t elements() const noexcept;
  /// The elements lie packed in order from `first`.
  [[nodiscard]] bool contiguous() const noexcept;
};

/// The elements a descriptor describes, `offset` bytes into the memory walked;
/// `vector` (one entry per dimension) when the statement has vector subscripts.
walk walk_of(const descriptor& d, std::ptrdiff_t offset = 0,
             const vector_subscript* vector = nullptr, span_rule rule = span_rule::trusted);
/// The elements a reference chain selects in a coarray, of gfortran type `type`, on
/// `image` (for messages).
walk walk_of(const token_data& t, const reference* refs, int type, int image, const char* what);

/// Copies the elements `from` selects in memory at `from_base` to those `to` selects at
/// `to_base` (as many), row by row.
void copy(const walk& from, const void* from_base, const walk& to, void* to_base);
/// Copies between a packed buffer and the elements a walk selects in local memory.
void pack(const walk& w, const void* base, std::byte* to);
void unpack(const std::byte* from, const walk& w, void* base);
/// A buffer of at least `bytes` for this thread, kept between calls (slot 0 or 1; its
/// contents last until the next call for the same slot).
std::byte* scratch(int slot, std::size_t bytes);

/// `count` packed elements of type `from` as packed elements of type `to` (integer and
/// real kinds convert; anything else must match exactly).
std::vector<std::byte> convert(const std::byte* in, std::size_t count, const element& from,
                               const element& to);

/// Moves a walk's elements between the coarray `t` on `image` (of the current team)
/// and a packed buffer here. Throws, naming the image, when the walk leaves the coarray.
void transfer(bool put, int image, const token_data& t, const walk& w, std::byte* packed,
              const char* what);

/// Moves the elements `remote` selects in coarray `t` on `image` to or from those
/// `local` selects at `base` (same type and count): directly between the two when the
/// image's memory is mapped here, else through one strided transfer.
void move(bool put, int image, const token_data& t, const walk& remote, const walk& local,
          void* base, const char* what);

/// Makes an allocatable destination the shape of `w` (gfortran allocates with malloc).
void fit(descriptor& d, const walk& w);

} // namespace crown::caf
