// fortran_bindings/caf/caf_walk.hpp — the elements one side of a transfer touches (a
// "walk", in Fortran's array element order), built from gfortran's descriptor, its
// vector subscripts or a reference chain; and moving them between a packed buffer
// here and the image that holds the coarray.
#pragma once
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include <cstddef>
#include <span>
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

/// How many of lo, lo + step, ... lie between lo and hi (Fortran's triplet; 0 when none).
std::size_t count_of(std::ptrdiff_t lo, std::ptrdiff_t hi, std::ptrdiff_t step, const char* what);
/// The elements lo..hi by step of a dimension whose index `lower` is at byte 0 and whose
/// neighbours are `scale` bytes apart; adds the offset of `lo` to `first`.
axis progression(std::ptrdiff_t lo, std::ptrdiff_t hi, std::ptrdiff_t step, std::ptrdiff_t lower,
                 std::ptrdiff_t scale, std::ptrdiff_t& first, const char* what);

/// The elements a descriptor describes, `offset` bytes into the memory walked;
/// `vector` (one entry per dimension) when the statement has vector subscripts.
walk walk_of(const descriptor& d, std::ptrdiff_t offset = 0,
             const vector_subscript* vector = nullptr, span_rule rule = span_rule::trusted);

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

/// Moves a walk's elements between the block `t` (a coarray, or an allocatable component's
/// data) on `image` (of the current team) and a packed buffer here. Throws, naming the image, when
/// the walk leaves the coarray.
void transfer(bool put, int image, const crown::caf_api::heap_block& t, const walk& w,
              std::byte* packed, const char* what);

/// Moves the elements `remote` selects in block `t` on `image` to or from those
/// `local` selects at `base` (same type and count): directly between the two when the
/// image's memory is mapped here, else through one strided transfer.
void move(bool put, int image, const crown::caf_api::heap_block& t, const walk& remote,
          const walk& local, void* base, const char* what);

/// The whole of a collective's argument `a`, packed: in place when it is contiguous, else a
/// copy. gfortran leaves `span` unset in some of them (span_rule), so the elements are
/// taken `elem_len` bytes times the stride apart.
struct packed_array {
  walk w;
  std::vector<std::byte> copy;
  std::span<std::byte> bytes;
  explicit packed_array(const descriptor& a);
  /// Writes a copy back into `a`.
  void store(const descriptor& a) const;
};

/// Makes an allocatable destination the shape of `w` (gfortran allocates with malloc).
void fit(descriptor& d, const walk& w);

} // namespace crown::caf
