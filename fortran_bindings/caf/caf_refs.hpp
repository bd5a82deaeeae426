// fortran_bindings/caf/caf_refs.hpp — what a reference chain (gfortran's *_by_ref entry
// points and IS_PRESENT) selects on an image: components, array references, and
// allocatable components, whose descriptor or pointer is read from that image and whose
// data then becomes the memory walked (each image allocates its own, of its own size).
#pragma once
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include "caf_walk.hpp"

namespace crown::caf {

struct located {
  crown::caf_api::heap_block
      block;             ///< on that image: the coarray, or an allocatable component's data
  walk w;                ///< within `block`
  bool allocated = true; ///< false: an allocatable component on the way is not allocated
};

/// The elements `refs` selects in coarray `t` on `image` (of the current team), of
/// gfortran type `type`. An allocatable component that is not allocated there is an
/// error naming it, unless `may_be_unallocated` (IS_PRESENT): then `allocated` is false.
located locate(const token_data& t, const reference* refs, int type, int image, const char* what,
               bool may_be_unallocated = false);

} // namespace crown::caf
