// Reference chains (caf_refs.hpp).
#include "caf_refs.hpp"
#include "caf_status.hpp"
#include "transport/caf_interface.hpp"
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace crown::caf {
namespace {

/// The number of dimensions an array reference gives.
int dimensions_of(const reference& r) {
  int d = 0;
  while (d < 15 && r.u.a.mode[d] != caf_arr_none) ++d;
  return d;
}

/// Follows one allocatable component: reads its descriptor (when an array reference
/// follows; its first `rank` dimensions) or its pointer from `at` in `block` on
/// `rank`, into `desc`. Returns the component's data as a block of that image's heap
/// ({} when it is not allocated). `element` becomes the size of its elements, which
/// gfortran gives as 0 for a deferred-length character: the descriptor's, or for a
/// scalar the size the owner allocated (component_size).
crown::caf_api::heap_block follow(int world_rank, const crown::caf_api::heap_block& block,
                                  std::ptrdiff_t at, const reference& r, descriptor& desc,
                                  std::size_t& element, int image, const char* what) {
  const reference* next = r.next;
  const int rank = next && next->type == caf_ref_array ? dimensions_of(*next) : -1;
  const std::size_t header = offsetof(descriptor, dim),
                    bytes = rank < 0 ? sizeof(void*) : header + rank * sizeof(dimension);
  if (at < 0 || static_cast<std::size_t>(at) + bytes > block.bytes)
    throw crown::argument_error(what, "image " + std::to_string(image) + ": a component at byte " +
                                          std::to_string(at) + " beyond the " +
                                          std::to_string(block.bytes) + " bytes that hold it");
  std::uintptr_t address = 0;
  std::size_t size = r.item_size;
  if (rank < 0) {
    crown::caf_api::remote_get(world_rank, block.offset + static_cast<std::uint64_t>(at), &address,
                               sizeof address);
  } else {
    crown::caf_api::remote_get(world_rank, block.offset + static_cast<std::uint64_t>(at), &desc,
                               bytes);
    if (!desc.base_addr) return {}; // the rest is not set before the first ALLOCATE
    if (desc.rank() != rank)
      throw crown::argument_error(what, "image " + std::to_string(image) + ": a rank-" +
                                            std::to_string(rank) +
                                            " reference to an allocatable component of rank " +
                                            std::to_string(desc.rank()));
    address = reinterpret_cast<std::uintptr_t>(desc.base_addr);
    size = desc.elements() * desc.dtype.elem_len;
  }
  if (!address) return {};
  if (rank < 0 && size == 0) size = component_size(world_rank, address);
  element = rank < 0 ? size : desc.dtype.elem_len;
  const std::int64_t offset = peer_heap_offset(world_rank, address, size);
  if (offset < 0)
    throw crown::state_error(what, "image " + std::to_string(image) +
                                       ": an allocatable component's data lies outside Crown's "
                                       "heap (allocated by something else than ALLOCATE, e.g. "
                                       "MOVE_ALLOC from a variable that is not a coarray)");
  return {static_cast<std::uint64_t>(offset), std::max<std::size_t>(size, 1), false};
}

/// Adds an array reference's dimensions to `w`. An allocatable array's reference gives
/// Fortran indices within its descriptor `bounds`; a static array's gives element
/// offsets, already scaled by the dimension's stride (`bounds` null).
void add_array_ref(walk& w, const reference& r, std::size_t item_size, const descriptor* bounds,
                   bool& ranked, int image, const char* what) {
  const bool had_rank = ranked;
  for (int d = 0; d < dimensions_of(r); ++d) {
    const unsigned char mode = r.u.a.mode[d];
    const auto& s = r.u.a.dim[d].s;
    if (mode == caf_arr_vector)
      throw crown::argument_error(what, "vector subscripts in this statement are not supported");
    if (bounds && d >= bounds->rank())
      throw crown::argument_error(what, "an array reference beyond the array's rank");
    std::ptrdiff_t lo = mode == caf_arr_full ? 0 : s.start, hi = s.end, step = s.stride, lower = 0;
    auto scale = static_cast<std::ptrdiff_t>(item_size);
    if (bounds) {
      lower = bounds->dim[d].lower_bound;
      scale *= bounds->dim[d].stride;
      const std::ptrdiff_t upper = bounds->dim[d].ubound;
      // Omitted bounds are the array's whatever the stride's sign: d(::-1) is empty.
      if (mode == caf_arr_full || mode == caf_arr_open_start) lo = lower;
      if (mode == caf_arr_full || mode == caf_arr_open_end) hi = upper;
      if (step == 0) step = 1;
      const std::size_t count = mode == caf_arr_single ? 1 : count_of(lo, hi, step, what);
      const std::ptrdiff_t last = lo + (static_cast<std::ptrdiff_t>(count) - 1) * step;
      if (count && (std::min(lo, last) < lower || std::max(lo, last) > upper))
        throw crown::argument_error(what, "image " + std::to_string(image) + ": index " +
                                              std::to_string(lo < lower ? lo : last) +
                                              " of dimension " + std::to_string(d + 1) +
                                              " out of bounds " + std::to_string(lower) + ":" +
                                              std::to_string(upper));
    }
    if (mode == caf_arr_single) {
      w.first += (lo - lower) * scale;
      continue;
    }
    if (had_rank)
      throw crown::argument_error(what, "two part references with rank in one reference");
    ranked = true;
    w.axes.push_back(progression(lo, hi, step, lower, scale, w.first, what));
  }
}

} // namespace

located locate(const token_data& t, const reference* refs, int type, int image, const char* what,
               bool may_be_unallocated) {
  const int world_rank = reachable_rank(image, what);
  located at{t.block, {}, true};
  descriptor component{}; // the last allocatable component's descriptor, read from the image
  const descriptor* bounds = t.desc;
  bool ranked = false;      // Fortran allows one part reference with rank
  std::size_t deferred = 0; // the element size of the last allocatable component
  for (const reference* r = refs; r; r = r->next) {
    const std::size_t item_size = r->item_size ? r->item_size : deferred;
    at.w.elem = {type, item_size};
    if (r->type == caf_ref_component && r->u.c.caf_token_offset == 0) {
      if (r->next && r->next->type == caf_ref_array)
        throw crown::argument_error(what, "pointer components of coarrays are not supported");
      at.w.first += r->u.c.offset;
      continue;
    }
    if (r->type == caf_ref_component) { // an allocatable component: its data is walked next
      if (ranked)
        throw crown::argument_error(what, "an allocatable component after a part with rank");
      at.block = follow(world_rank, at.block, at.w.first + r->u.c.offset, *r, component, deferred,
                        image, what);
      at.w.first = 0;
      at.w.elem.size = r->item_size ? r->item_size : deferred;
      bounds = &component;
      if (at.block.bytes) continue;
      if (may_be_unallocated) return {{}, {}, false};
      throw crown::state_error(what, "image " + std::to_string(image) +
                                         ": an allocatable component is not allocated there");
    }
    if (r->type != caf_ref_array && r->type != caf_ref_static_array)
      throw crown::argument_error(what, "reference type " + std::to_string(r->type));
    if (r->type == caf_ref_array && !bounds)
      throw crown::argument_error(what, "an array reference without a descriptor");
    add_array_ref(at.w, *r, item_size, r->type == caf_ref_array ? bounds : nullptr, ranked, image,
                  what);
    bounds = nullptr;
  }
  return at;
}

} // namespace crown::caf
