// libcrown_caf's locks, events and atomics: one word each in a coarray, changed with
// Crown's remote atomics (CPU atomics when every image of the coarray is mapped here).
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include "caf_status.hpp"
#include "transport/caf_interface.hpp"
#include <algorithm>
#include <crown/runtime.hpp>
#include <cstdint>
#include <string>

namespace {

using namespace crown::caf;

/// Locks, events and critical sections: one 8-byte word per element.
constexpr std::size_t word = sizeof(std::int64_t);

std::int64_t atomic_word(const void* token, std::size_t byte_offset, int rank,
                         crown::caf_api::atomic_op op, int width, std::int64_t value,
                         std::int64_t compare = 0) {
  const auto* t = static_cast<const token_data*>(token);
  check_reachable(rank, "atomic access");
  const std::uint64_t mask = width == 4 ? 0xffffffffu : ~std::uint64_t{0};
  const std::uint64_t old = crown::caf_api::remote_atomic(
      rank, t->block.offset + byte_offset, op, width, false,
      static_cast<std::uint64_t>(value) & mask, static_cast<std::uint64_t>(compare) & mask,
      t->block.cpu_atomics);
  return width == 4 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(old))
                    : static_cast<std::int64_t>(old);
}

int atomic_width(int type, int kind) {
  if (type != bt_integer && type != bt_logical)
    throw crown::argument_error("atomic", "atomics need an integer or logical of "
                                          "atomic_int_kind or atomic_logical_kind");
  if (kind != 4 && kind != 8)
    throw crown::argument_error("atomic", "kind " + std::to_string(kind) + " (4 or 8 allowed)");
  return kind;
}

std::int64_t read_int(const void* p, int width) {
  return width == 4 ? *static_cast<const std::int32_t*>(p) : *static_cast<const std::int64_t*>(p);
}
void write_int(void* p, int width, std::int64_t v) {
  if (width == 4)
    *static_cast<std::int32_t*>(p) = static_cast<std::int32_t>(v);
  else
    *static_cast<std::int64_t*>(p) = v;
}

/// A lock held by an image that has ended is never released: STAT_STOPPED_IMAGE or
/// STAT_FAILED_IMAGE instead of a wait. `holder` is an image of the initial team.
void check_holder(std::int64_t holder) {
  const image_state s = state_of(static_cast<int>(holder - 1));
  if (s == image_state::running) return;
  learn(static_cast<int>(holder - 1), s);
  const std::string why =
      "the lock is held by image " + std::to_string(holder) + " (of the initial team), which has ";
  if (s == image_state::stopped) throw image_stopped("lock", why + "stopped");
  throw image_failed("lock", why + "failed");
}

} // namespace

extern "C" {

void _gfortran_caf_lock(void* token, std::size_t index, int image, int* acquired, int* stat,
                        char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const int rank = rank_or_self(image, "lock");
    const std::int64_t me = crown::this_runtime().rank() + 1; // the holder's image, 0 when free
    crown::caf_api::backoff pause;
    for (unsigned polls = 0;;) {
      const std::int64_t holder =
          atomic_word(token, index * word, rank, crown::caf_api::atomic_op::compare_swap, 8, me, 0);
      if (holder == 0) break;
      if (holder == me) {
        if (stat) {
          *stat = stat_locked;
          return;
        }
        throw crown::state_error("lock", "this image already holds the lock");
      }
      if (acquired) { // LOCK(..., ACQUIRED_LOCK=): one try
        *acquired = 0;
        return;
      }
      if (++polls % 64 == 0) check_holder(holder);
      pause.pause();
    }
    if (acquired) *acquired = 1;
    crown::caf_api::heap_sync_local(); // what the previous holder wrote is visible
  });
}

void _gfortran_caf_unlock(void* token, std::size_t index, int image, int* stat, char* errmsg,
                          std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const int rank = rank_or_self(image, "unlock");
    const std::int64_t me = crown::this_runtime().rank() + 1;
    crown::caf_api::heap_quiet(); // this image's writes land before the lock is free
    const std::int64_t holder =
        atomic_word(token, index * word, rank, crown::caf_api::atomic_op::compare_swap, 8, 0, me);
    if (holder == me) return;
    if (stat) {
      *stat = holder == 0 ? stat_unlocked : stat_locked_other_image;
      return;
    }
    throw crown::state_error("unlock", holder == 0
                                           ? "the lock is not locked"
                                           : "the lock is held by image " + std::to_string(holder) +
                                                 " (of the initial team)");
  });
}

void _gfortran_caf_event_post(void* token, std::size_t index, int image, int* stat, char* errmsg,
                              std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const int rank = rank_or_self(image, "event post");
    check_running(rank, "event post"); // a post to an ended image is never waited for
    crown::caf_api::heap_quiet();      // earlier transfers complete before the post is seen
    (void)atomic_word(token, index * word, rank, crown::caf_api::atomic_op::add, 8, 1);
  });
}

void _gfortran_caf_event_wait(void* token, std::size_t index, int until, int* stat, char* errmsg,
                              std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const int me = crown::this_runtime().rank();
    const std::int64_t count = std::max(until, 1);
    crown::caf_api::backoff pause;
    while (atomic_word(token, index * word, me, crown::caf_api::atomic_op::load, 8, 0) < count)
      pause.pause();
    (void)atomic_word(token, index * word, me, crown::caf_api::atomic_op::add, 8, -count);
    crown::caf_api::heap_sync_local();
  });
}

void _gfortran_caf_event_query(void* token, std::size_t index, int image, int* count, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    const int rank = rank_or_self(image, "event_query");
    *count = static_cast<int>(
        atomic_word(token, index * word, rank, crown::caf_api::atomic_op::load, 8, 0));
  });
}

void _gfortran_caf_atomic_define(void* token, std::size_t offset, int image, void* value, int* stat,
                                 int type, int kind) {
  guarded(stat, nullptr, 0, [&] {
    const int width = atomic_width(type, kind);
    (void)atomic_word(token, offset, rank_or_self(image, "atomic_define"),
                      crown::caf_api::atomic_op::store, width, read_int(value, width));
  });
}

void _gfortran_caf_atomic_ref(void* token, std::size_t offset, int image, void* value, int* stat,
                              int type, int kind) {
  guarded(stat, nullptr, 0, [&] {
    const int width = atomic_width(type, kind);
    write_int(value, width,
              atomic_word(token, offset, rank_or_self(image, "atomic_ref"),
                          crown::caf_api::atomic_op::load, width, 0));
  });
}

void _gfortran_caf_atomic_cas(void* token, std::size_t offset, int image, void* old, void* compare,
                              void* new_value, int* stat, int type, int kind) {
  guarded(stat, nullptr, 0, [&] {
    const int width = atomic_width(type, kind);
    write_int(old, width,
              atomic_word(token, offset, rank_or_self(image, "atomic_cas"),
                          crown::caf_api::atomic_op::compare_swap, width,
                          read_int(new_value, width), read_int(compare, width)));
  });
}

void _gfortran_caf_atomic_op(int op, void* token, std::size_t offset, int image, void* value,
                             void* old, int* stat, int type, int kind) {
  guarded(stat, nullptr, 0, [&] {
    const int width = atomic_width(type, kind);
    using crown::caf_api::atomic_op;
    atomic_op o{};
    if (op == caf_atomic_add)
      o = atomic_op::add;
    else if (op == caf_atomic_and)
      o = atomic_op::bit_and;
    else if (op == caf_atomic_or)
      o = atomic_op::bit_or;
    else if (op == caf_atomic_xor)
      o = atomic_op::bit_xor;
    else
      throw crown::argument_error("atomic", "unknown operation " + std::to_string(op));
    const std::int64_t before =
        atomic_word(token, offset, rank_or_self(image, "atomic"), o, width, read_int(value, width));
    if (old) write_int(old, width, before);
  });
}

} // extern "C"
