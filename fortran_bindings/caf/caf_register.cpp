// libcrown_caf's registration: coarrays (collective heap blocks of the current team),
// locks, events and critical sections (one word per element), and allocatable components
// of coarrays, which each image allocates alone, of its own size, in its own heap.
//
// gfortran registers an allocatable component in two steps: REGISTER_ONLY makes its token
// when the coarray comes to be (no memory), ALLOCATE_ONLY gives it memory at each
// ALLOCATE; DEALLOCATE_ONLY frees the memory, DEREGISTER the token too. gfortran 12 also
// registers a component's memory as an allocatable coarray (type 1) when an intrinsic
// assignment (re)allocates it (x%a = [...]): a token slot inside this image's heap is a
// component's, so that is done as ALLOCATE_ONLY.
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include "caf_status.hpp"
#include "transport/caf_interface.hpp"
#include <algorithm>
#include <crown/sync.hpp>
#include <cstdint>
#include <cstring>
#include <string>

namespace {

using namespace crown::caf;

/// Locks, events and critical sections: one 8-byte word per element.
constexpr std::size_t word = sizeof(std::int64_t);

/// Whether `slot` (where gfortran keeps a token) lies in a coarray, i.e. is a component's.
bool in_heap(const void* slot) { return crown::caf_api::heap_offset_of(slot, sizeof(void*)) >= 0; }

void register_component(std::size_t size, int type, void** token, descriptor* desc) {
  auto* t = static_cast<token_data*>(*token);
  if (type == caf_register_component_only || !is_component_token(t)) t = new_component_token();
  *token = t;
  void* data = type == caf_register_component_only ? nullptr : allocate_component(*t, size);
  if (desc) desc->base_addr = data;
}

void register_coarray(std::size_t size, int type, void** token, descriptor* desc) {
  // For locks, events and critical sections `size` counts elements.
  const bool words = type >= caf_register_lock_static && type <= caf_register_event_alloc;
  if (type != caf_register_static && type != caf_register_alloc && !words)
    throw crown::argument_error("coarray registration",
                                "unknown registration type " + std::to_string(type));
  const std::size_t bytes = std::max<std::size_t>(size, 1) * (words ? word : 1);
  enter_collective(current_team(), "coarray allocation");
  token_data* t = new_token(images(), bytes, words);
  if (words) { // free locks and empty events before any image may use them
    std::memset(crown::caf_api::heap_address(t->block.offset), 0, bytes);
    crown::sync_all(images());
  }
  *token = t;
  if (desc) desc->base_addr = crown::caf_api::heap_address(t->block.offset);
  if (type == caf_register_alloc) t->desc = desc;
}

} // namespace

extern "C" {

void _gfortran_caf_register(std::size_t size, int type, void** token, descriptor* desc, int* stat,
                            char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const bool component = type == caf_register_component_only ||
                           type == caf_register_component_allocate ||
                           (type == caf_register_alloc && in_heap(token));
    if (component)
      register_component(size, type, token, desc);
    else
      register_coarray(size, type, token, desc);
  });
}

void _gfortran_caf_deregister(void** token, int type, int* stat, char* errmsg,
                              std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    auto* t = static_cast<token_data*>(*token);
    if (!t) throw crown::state_error("coarray deallocation", "not allocated");
    if (is_component_token(t)) {
      if (type == caf_deregister_deallocate_only) {
        free_component(*t);
        return;
      }
      delete_component_token(t);
    } else {
      enter_collective(current_team(), "coarray deallocation");
      delete_token(t);
    }
    *token = nullptr;
  });
}

} // extern "C"
