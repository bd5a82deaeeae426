// fortran_bindings/caf/caf_abi.hpp — the parts of gfortran's coarray ABI (11 to 14)
// that libcrown_caf reads: its array descriptor and the registration kinds. Layout as
// in libgfortran (GFC_ARRAY_DESCRIPTOR, dtype_type) for GCC 11 to 14.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace crown::caf {

// gfortran's basic types (libgfortran's BT_*).
inline constexpr int bt_integer = 1, bt_logical = 2, bt_real = 3, bt_complex = 4, bt_derived = 5,
                     bt_character = 6;
// caf_register_t values (locks to events: one word per element; the last two: allocatable
// components of coarrays) and caf_deregister_t's "free the memory, keep the token".
inline constexpr int caf_register_static = 0, caf_register_alloc = 1, caf_register_lock_static = 2,
                     caf_register_event_alloc = 6, caf_register_component_only = 7,
                     caf_register_component_allocate = 8, caf_deregister_deallocate_only = 1;
// Atomic operations (GFC_CAF_ATOMIC_*) and the STAT_* values of LOCK/UNLOCK.
inline constexpr int caf_atomic_add = 1, caf_atomic_and = 2, caf_atomic_or = 3, caf_atomic_xor = 4;
inline constexpr int stat_unlocked = 0, stat_locked = 1, stat_locked_other_image = 2, // gfortran's
    stat_stopped_image = 6000, stat_failed_image = 6001;
/// STAT= of SYNC IMAGES naming an image twice: OpenCoarrays' STAT_DUP_SYNC_IMAGES.
inline constexpr int stat_duplicate_image = 3;
// co_reduce's opr_flags (GFC_CAF_*): the result comes by reference, hidden string
// lengths follow, the arguments are passed by value.
inline constexpr int caf_byref = 1, caf_hiddenlen = 2, caf_arg_value = 4, caf_arg_desc = 8;

/// caf_reference_t: one step of a reference chain (`*_by_ref`). Array references of a
/// static array give start, end (inclusive) and stride per dimension as element offsets;
/// those of an allocatable array give Fortran indices, bounded by its descriptor.
inline constexpr int caf_ref_component = 0, caf_ref_array = 1, caf_ref_static_array = 2;
inline constexpr unsigned char caf_arr_none = 0, caf_arr_vector = 1, caf_arr_full = 2,
                               caf_arr_range = 3, caf_arr_single = 4, caf_arr_open_end = 5,
                               caf_arr_open_start = 6;
struct reference {
  reference* next;
  int type;
  std::size_t item_size;
  union {
    struct {
      std::ptrdiff_t offset, caf_token_offset;
    } c;
    struct {
      unsigned char mode[15];
      int static_array_type;
      union {
        struct {
          std::ptrdiff_t start, end, stride;
        } s;
        struct {
          void* vector;
          std::size_t nvec;
          int kind;
        } v;
      } dim[15];
    } a;
  } u;
};

/// caf_vector_t: per dimension of a coarray, a vector subscript (nvec > 0) or a triplet
/// of Fortran indices.
struct vector_subscript {
  std::size_t nvec;
  union {
    struct {
      void* vector;
      int kind;
    } v;
    struct {
      std::ptrdiff_t lower_bound, upper_bound, stride;
    } triplet;
  } u;
};

/// An element type: gfortran type code and size in bytes.
struct element {
  int type = 0;
  std::size_t size = 0;
  int kind = 0; ///< of a character type (1 or 4; bytes per character), 0 for 1
  [[nodiscard]] int char_kind() const noexcept { return kind == 4 ? 4 : 1; }
  friend bool operator==(const element& a, const element& b) noexcept {
    return a.type == b.type && a.size == b.size &&
           (a.type != bt_character || a.char_kind() == b.char_kind());
  }
  [[nodiscard]] std::string text() const {
    static const char* const names[] = {"unknown", "integer", "logical",  "real",
                                        "complex", "derived", "character"};
    return std::string(type >= 0 && type <= 6 ? names[type] : "type " + std::to_string(type)) +
           "(" + std::to_string(size) + " bytes)";
  }
};

struct dtype_type {
  std::size_t elem_len;
  int version;
  signed char rank;
  signed char type;
  signed short attribute;
};
struct dimension {
  std::ptrdiff_t stride; ///< in elements
  std::ptrdiff_t lower_bound;
  std::ptrdiff_t ubound;
};

/// Whether a descriptor's `span` may be read. gfortran (11 to 14) sets it in every
/// descriptor it builds for a coindexed access (gfc_conv_expr_descriptor: the byte
/// distance of the elements, the parent type's size for a component of an array of
/// derived type; gfc_conv_scalar_to_descriptor; ALLOCATE) and in the arguments of the
/// collectives, except one case: co_broadcast of a derived type with allocatable
/// components passes each allocatable or character component as a rank-1 view that
/// sets only dtype, the bounds, stride 1 and data, leaving span and offset as garbage
/// (trans-array.cc, structure_alloc_comps, BCAST_ALLOC_COMP). A collective's argument is
/// never a component section (gfortran passes the whole parent array then), so the
/// collectives ignore span and take elements elem_len bytes times the stride apart.
enum class span_rule { trusted, ignored };

/// gfortran's array descriptor (a scalar has rank 0). Only the first `rank()` entries
/// of `dim` exist: gfortran allocates descriptors with as many as the rank.
struct descriptor {
  void* base_addr;
  std::size_t offset;
  dtype_type dtype;
  std::ptrdiff_t span;
  dimension dim[15];

  [[nodiscard]] int rank() const noexcept { return dtype.rank; }
  [[nodiscard]] element elem() const noexcept { return {dtype.type, dtype.elem_len}; }
  [[nodiscard]] std::size_t extent(int d) const noexcept {
    const std::ptrdiff_t e = dim[d].ubound - dim[d].lower_bound + 1;
    return e > 0 ? static_cast<std::size_t>(e) : 0;
  }
  [[nodiscard]] std::size_t elements() const noexcept {
    std::size_t n = 1;
    for (int d = 0; d < rank(); ++d) n *= extent(d);
    return n;
  }
  /// Bytes between neighbours along dimension d.
  [[nodiscard]] std::ptrdiff_t byte_stride(int d, span_rule rule) const noexcept {
    const auto elem = static_cast<std::ptrdiff_t>(dtype.elem_len);
    return dim[d].stride * (rule == span_rule::trusted && span > 0 ? span : elem);
  }
};

} // namespace crown::caf
