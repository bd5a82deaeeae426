// libcrown_caf: the gfortran -fcoarray=lib runtime (the _gfortran_caf_* ABI of
// gfortran 12 to 14) on Crown's heap. README's table lists every symbol's status; those
// not here do not link, rather than misbehave.
//
// Coarrays are collective heap blocks of the current team. gfortran describes a
// transfer by a descriptor plus a byte offset into the coarray (with vector subscripts
// beside it) or by a reference chain; both become walks (caf_walk.hpp).
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include "caf_walk.hpp"
#include <algorithm>
#include <crown/collectives.hpp>
#include <crown/crown.h>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/runtime.hpp>
#include <crown/sync.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
void _gfortran_caf_finalize(void);
// libgfortran's RANDOM_INIT for one image, and RANDOM_SEED.
void _gfortran_random_init(int repeatable, int image_distinct, int image);
void _gfortran_random_seed_i4(std::int32_t* size, crown::caf::descriptor* put,
                              crown::caf::descriptor* get);
}

namespace {

using namespace crown::caf;

/// Locks, events and critical sections: one 8-byte word per element.
constexpr std::size_t word = sizeof(std::int64_t);

bool is_me(int image, const char* what) {
  return rank_of(image, what) == crown::this_runtime().rank();
}

std::int64_t atomic_word(const void* token, std::size_t byte_offset, int rank,
                         crown::detail::atomic_op op, int width, std::int64_t value,
                         std::int64_t compare = 0) {
  const auto* t = static_cast<const token_data*>(token);
  const std::uint64_t mask = width == 4 ? 0xffffffffu : ~std::uint64_t{0};
  const std::uint64_t old = crown::detail::remote_atomic(
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

/// A walk whose characters are `kind` bytes wide (gfortran passes the kinds beside).
walk with_kind(walk w, int kind) {
  if (w.elem.type == bt_character) w.elem.kind = kind;
  return w;
}

/// `count` packed elements of type `from` at `packed`, made ready for `n` target
/// elements of type `to`: a scalar is repeated, then converted (in `storage` when either
/// happens).
const std::byte* fit_source(const std::byte* packed, std::size_t count, const element& from,
                            std::size_t n, const element& to, std::vector<std::byte>& storage,
                            const char* what) {
  if (count == 1 && n > 1) { // a scalar assigned to a section
    std::vector<std::byte> many(n * from.size);
    for (std::size_t i = 0; i < n; ++i) std::memcpy(many.data() + i * from.size, packed, from.size);
    storage = convert(many.data(), n, from, to);
    return storage.data();
  }
  if (count != n)
    throw crown::argument_error(what, std::to_string(count) + " elements for a section of " +
                                          std::to_string(n));
  if (from == to) return packed;
  storage = convert(packed, n, from, to);
  return storage.data();
}

/// Puts local `src` into the elements `remote` selects on `image`: element for element
/// when the types match and source and target cannot overlap; otherwise through a
/// packed copy (a scalar repeated, kinds converted, an overlap resolved).
void put(const token_data& t, int image, const walk& remote, const descriptor& src, int src_kind,
         bool may_overlap, const char* what) {
  const std::size_t n = remote.elements();
  (void)rank_of(image, what);
  if (!n) return;
  const walk from = with_kind(walk_of(src), src_kind);
  if (from.elements() == n && from.elem == remote.elem && !(may_overlap && is_me(image, what)))
    return move(true, image, t, remote, from, src.base_addr, what);
  std::vector<std::byte> packed(from.elements() * from.elem.size), converted;
  pack(from, src.base_addr, packed.data());
  const std::byte* ready =
      fit_source(packed.data(), from.elements(), from.elem, n, remote.elem, converted, what);
  transfer(true, image, t, remote, const_cast<std::byte*>(ready), what);
}

/// Gets the elements `remote` selects on `image` into local `dst` (same count).
void get(const token_data& t, int image, const walk& remote, const descriptor& dst, int dst_kind,
         bool may_overlap, const char* what) {
  const std::size_t n = remote.elements();
  (void)rank_of(image, what);
  const walk to = with_kind(walk_of(dst), dst_kind);
  if (to.elements() != n)
    throw crown::argument_error(what, std::to_string(n) + " elements into " +
                                          std::to_string(to.elements()));
  if (!n) return;
  if (to.elem == remote.elem && !(may_overlap && is_me(image, what)))
    return move(false, image, t, remote, to, dst.base_addr, what);
  std::vector<std::byte> packed(n * remote.elem.size);
  transfer(false, image, t, remote, packed.data(), what);
  const auto converted = convert(packed.data(), n, remote.elem, to.elem);
  unpack(converted.data(), to, dst.base_addr);
}

/// a(...)[i] = b(...)[j]: through a buffer here.
void copy(const token_data& to_t, int to_image, const walk& to, const token_data& from_t,
          int from_image, const walk& from) {
  const std::size_t n = to.elements(), count = from.elements();
  (void)rank_of(to_image, "coarray put");
  if (!n) return;
  std::byte* packed = scratch(1, count * from.elem.size);
  transfer(false, from_image, from_t, from, packed, "coarray get");
  std::vector<std::byte> converted;
  const std::byte* ready =
      fit_source(packed, count, from.elem, n, to.elem, converted, "coarray copy");
  transfer(true, to_image, to_t, to, const_cast<std::byte*>(ready), "coarray put");
}

/// An INTEGER array of `kind` for FAILED_IMAGES and STOPPED_IMAGES (allocated here, as
/// gfortran expects of an allocatable function result).
void return_images(descriptor* out, const int* kind, const std::vector<int>& list) {
  const int k = kind ? *kind : 4;
  if (k != 1 && k != 2 && k != 4 && k != 8)
    throw crown::argument_error("failed_images/stopped_images", "kind " + std::to_string(k));
  const auto n = static_cast<std::ptrdiff_t>(list.size());
  out->base_addr = std::malloc(std::max<std::size_t>(list.size(), 1) * static_cast<std::size_t>(k));
  if (!out->base_addr) throw std::bad_alloc();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto v = static_cast<std::int64_t>(list[i]);
    std::memcpy(static_cast<std::byte*>(out->base_addr) + i * static_cast<std::size_t>(k), &v,
                static_cast<std::size_t>(k)); // little-endian
  }
  out->dtype = {static_cast<std::size_t>(k), 0, 1, bt_integer, 0};
  out->dim[0] = {1, 0, n - 1}; // gfortran rebases the result to lower bound 1
  out->offset = 0;
  out->span = k;
}

/// STOP and ERROR STOP, with a number (`text` null) or a message (null for none).
[[noreturn]] void stop(int code, const char* text, std::size_t len, bool error, bool quiet,
                       bool numbered) {
  std::fflush(stdout);
  const char* what = error ? "ERROR STOP" : "STOP";
  if (!quiet) {
    if (text)
      std::fprintf(stderr, "%s %.*s\n", what, static_cast<int>(len), text);
    else if (numbered)
      std::fprintf(stderr, "%s %d\n", what, code);
    else if (error)
      std::fprintf(stderr, "%s\n", what);
  }
  std::fflush(stderr);
  if (error) MPI_Abort(MPI_COMM_WORLD, code ? code : 1); // every image ends
  _gfortran_caf_finalize(); // a normal stop: this image's part of finalisation
  std::exit(code);
}

} // namespace

extern "C" {

void _gfortran_caf_init(int* argc, char*** argv) { start(argc, argv); }

void _gfortran_caf_finalize(void) {
  wait_for_all_to_stop(); // termination synchronisation: the end of every image
  release_all();
  crown_finalize();
}

int _gfortran_caf_this_image(int /*distance*/) { return images().rank() + 1; }

int _gfortran_caf_num_images(int distance, int failed) {
  const team* t = &current_team();
  for (int d = 0; d < distance && t->parent; ++d) t = t->parent;
  return failed == 1 ? 0 : t->images.size(); // no image fails and leaves the job running
}

void _gfortran_caf_register(std::size_t size, int type, void** token, descriptor* desc, int* stat,
                            char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    // For locks, events and critical sections `size` counts elements.
    const bool words = type >= caf_register_lock_static && type <= caf_register_event_alloc;
    if (type != caf_register_static && type != caf_register_alloc && !words)
      throw crown::argument_error("coarray registration",
                                  "registration type " + std::to_string(type) +
                                      " (allocatable components of coarrays) is not supported");
    const std::size_t bytes = std::max<std::size_t>(size, 1) * (words ? word : 1);
    token_data* t = new_token(images(), bytes, words);
    if (words) { // free locks and empty events before any image may use them
      std::memset(crown::detail::heap_address(t->block.offset), 0, bytes);
      crown::sync_all(images());
    }
    *token = t;
    if (desc) desc->base_addr = crown::detail::heap_address(t->block.offset);
    if (type == caf_register_alloc) t->desc = desc;
  });
}

void _gfortran_caf_deregister(void** token, int /*type*/, int* stat, char* errmsg,
                              std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    auto* t = static_cast<token_data*>(*token);
    if (!t) throw crown::state_error("coarray deallocation", "not allocated");
    delete_token(t);
    *token = nullptr;
  });
}

void _gfortran_caf_send(void* token, std::size_t offset, int image, descriptor* dest,
                        vector_subscript* dst_vector, descriptor* src, int dst_kind, int src_kind,
                        bool may_require_tmp, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    const walk remote =
        with_kind(walk_of(*dest, static_cast<std::ptrdiff_t>(offset), dst_vector), dst_kind);
    put(*static_cast<token_data*>(token), image, remote, *src, src_kind, may_require_tmp,
        "coarray put");
  });
}

void _gfortran_caf_get(void* token, std::size_t offset, int image, descriptor* src,
                       vector_subscript* src_vector, descriptor* dest, int src_kind, int dst_kind,
                       bool may_require_tmp, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    const walk remote =
        with_kind(walk_of(*src, static_cast<std::ptrdiff_t>(offset), src_vector), src_kind);
    get(*static_cast<token_data*>(token), image, remote, *dest, dst_kind, may_require_tmp,
        "coarray get");
  });
}

void _gfortran_caf_sendget(void* dst_token, std::size_t dst_offset, int dst_image, descriptor* dest,
                           vector_subscript* dst_vector, void* src_token, std::size_t src_offset,
                           int src_image, descriptor* src, vector_subscript* src_vector,
                           int dst_kind, int src_kind, bool /*may_require_tmp*/, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    copy(*static_cast<token_data*>(dst_token), dst_image,
         with_kind(walk_of(*dest, static_cast<std::ptrdiff_t>(dst_offset), dst_vector), dst_kind),
         *static_cast<token_data*>(src_token), src_image,
         with_kind(walk_of(*src, static_cast<std::ptrdiff_t>(src_offset), src_vector), src_kind));
  });
}

void _gfortran_caf_get_by_ref(void* token, int image, descriptor* dst, reference* refs,
                              int dst_kind, int src_kind, bool may_require_tmp,
                              bool dst_reallocatable, int* stat, int src_type) {
  guarded(stat, nullptr, 0, [&] {
    const auto& t = *static_cast<const token_data*>(token);
    const walk remote = with_kind(walk_of(t, refs, src_type, image, "coarray get"), src_kind);
    if (dst_reallocatable) fit(*dst, remote);
    get(t, image, remote, *dst, dst_kind, may_require_tmp, "coarray get");
  });
}

void _gfortran_caf_send_by_ref(void* token, int image, descriptor* src, reference* refs,
                               int dst_kind, int src_kind, bool may_require_tmp,
                               bool /*dst_reallocatable*/, int* stat, int dst_type) {
  guarded(stat, nullptr, 0, [&] {
    const auto& t = *static_cast<const token_data*>(token);
    put(t, image, with_kind(walk_of(t, refs, dst_type, image, "coarray put"), dst_kind), *src,
        src_kind, may_require_tmp, "coarray put");
  });
}

void _gfortran_caf_sendget_by_ref(void* dst_token, int dst_image, reference* dst_refs,
                                  void* src_token, int src_image, reference* src_refs, int dst_kind,
                                  int src_kind, bool /*may_require_tmp*/, int* dst_stat,
                                  int* src_stat, int dst_type, int src_type) {
  if (src_stat) *src_stat = 0;
  guarded(dst_stat ? dst_stat : src_stat, nullptr, 0, [&] {
    const auto& to = *static_cast<const token_data*>(dst_token);
    const auto& from = *static_cast<const token_data*>(src_token);
    copy(to, dst_image,
         with_kind(walk_of(to, dst_refs, dst_type, dst_image, "coarray put"), dst_kind), from,
         src_image,
         with_kind(walk_of(from, src_refs, src_type, src_image, "coarray get"), src_kind));
  });
}

void _gfortran_caf_lock(void* token, std::size_t index, int image, int* acquired, int* stat,
                        char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const int rank = rank_or_self(image, "lock");
    const std::int64_t me = crown::this_runtime().rank() + 1; // the holder's image, 0 when free
    crown::detail::backoff pause;
    for (unsigned polls = 0;;) {
      const std::int64_t holder =
          atomic_word(token, index * word, rank, crown::detail::atomic_op::compare_swap, 8, me, 0);
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
      if (++polls % 64 == 0 && has_stopped(static_cast<int>(holder - 1)))
        throw image_stopped("lock", "the lock is held by image " + std::to_string(holder) +
                                        " (of the initial team), which has stopped");
      pause.pause();
    }
    if (acquired) *acquired = 1;
    crown::detail::heap_sync_local(); // what the previous holder wrote is visible
  });
}

void _gfortran_caf_unlock(void* token, std::size_t index, int image, int* stat, char* errmsg,
                          std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const int rank = rank_or_self(image, "unlock");
    const std::int64_t me = crown::this_runtime().rank() + 1;
    crown::detail::heap_quiet(); // this image's writes land before the lock is free
    const std::int64_t holder =
        atomic_word(token, index * word, rank, crown::detail::atomic_op::compare_swap, 8, 0, me);
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
    crown::detail::heap_quiet(); // earlier transfers complete before the post is seen
    (void)atomic_word(token, index * word, rank, crown::detail::atomic_op::add, 8, 1);
  });
}

void _gfortran_caf_event_wait(void* token, std::size_t index, int until, int* stat, char* errmsg,
                              std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const int me = crown::this_runtime().rank();
    const std::int64_t count = std::max(until, 1);
    crown::detail::backoff pause;
    while (atomic_word(token, index * word, me, crown::detail::atomic_op::load, 8, 0) < count)
      pause.pause();
    (void)atomic_word(token, index * word, me, crown::detail::atomic_op::add, 8, -count);
    crown::detail::heap_sync_local();
  });
}

void _gfortran_caf_event_query(void* token, std::size_t index, int image, int* count, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    const int rank = rank_or_self(image, "event_query");
    *count = static_cast<int>(
        atomic_word(token, index * word, rank, crown::detail::atomic_op::load, 8, 0));
  });
}

void _gfortran_caf_atomic_define(void* token, std::size_t offset, int image, void* value, int* stat,
                                 int type, int kind) {
  guarded(stat, nullptr, 0, [&] {
    const int width = atomic_width(type, kind);
    (void)atomic_word(token, offset, rank_or_self(image, "atomic_define"),
                      crown::detail::atomic_op::store, width, read_int(value, width));
  });
}

void _gfortran_caf_atomic_ref(void* token, std::size_t offset, int image, void* value, int* stat,
                              int type, int kind) {
  guarded(stat, nullptr, 0, [&] {
    const int width = atomic_width(type, kind);
    write_int(value, width,
              atomic_word(token, offset, rank_or_self(image, "atomic_ref"),
                          crown::detail::atomic_op::load, width, 0));
  });
}

void _gfortran_caf_atomic_cas(void* token, std::size_t offset, int image, void* old, void* compare,
                              void* new_value, int* stat, int type, int kind) {
  guarded(stat, nullptr, 0, [&] {
    const int width = atomic_width(type, kind);
    write_int(old, width,
              atomic_word(token, offset, rank_or_self(image, "atomic_cas"),
                          crown::detail::atomic_op::compare_swap, width, read_int(new_value, width),
                          read_int(compare, width)));
  });
}

void _gfortran_caf_atomic_op(int op, void* token, std::size_t offset, int image, void* value,
                             void* old, int* stat, int type, int kind) {
  guarded(stat, nullptr, 0, [&] {
    const int width = atomic_width(type, kind);
    using crown::detail::atomic_op;
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

void _gfortran_caf_sync_all(int* stat, char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [] { sync_team(current_team(), "sync all"); });
}

void _gfortran_caf_sync_memory(int* stat, char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [] { crown::sync_memory(); });
}

void _gfortran_caf_sync_images(int count, int images[], int* stat, char* errmsg,
                               std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    team& t = current_team();
    const int me = t.images.rank();
    std::vector<int> partners; // 0-based
    for (int i = 0; i < (count < 0 ? t.images.size() : count); ++i) {
      const int image = count < 0 ? i + 1 : images[i];
      (void)rank_of(image, "sync images");
      if (image - 1 != me) partners.push_back(image - 1);
    }
    std::sort(partners.begin(), partners.end());
    if (std::adjacent_find(partners.begin(), partners.end()) != partners.end())
      throw crown::argument_error("sync images", "an image is named twice");
    sync_partners(t, partners);
  });
}

void _gfortran_caf_stop_numeric(int code, bool quiet) {
  stop(code, nullptr, 0, false, quiet, true);
}
void _gfortran_caf_stop_str(const char* text, std::size_t len, bool quiet) {
  stop(0, text, len, false, quiet, false);
}
void _gfortran_caf_error_stop(int code, bool quiet) { stop(code, nullptr, 0, true, quiet, true); }
void _gfortran_caf_error_stop_str(const char* text, std::size_t len, bool quiet) {
  stop(1, text, len, true, quiet, false);
}

/// FAIL IMAGE: without fault-tolerant MPI the other images cannot go on, so the job ends.
void _gfortran_caf_fail_image(void) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "ERROR STOP crown caf: image %d: FAIL IMAGE: Crown cannot continue without an "
               "image (no fault-tolerant MPI); the job ends\n",
               images().rank() + 1);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int _gfortran_caf_image_status(int image, void* /*team*/) {
  int status = 0;
  guarded(nullptr, nullptr, 0,
          [&] { status = has_stopped(rank_of(image, "image_status")) ? stat_stopped_image : 0; });
  return status;
}

void _gfortran_caf_failed_images(descriptor* out, void* /*team*/, int* kind) {
  guarded(nullptr, nullptr, 0, [&] { return_images(out, kind, {}); });
}

void _gfortran_caf_stopped_images(descriptor* out, void* /*team*/, int* kind) {
  guarded(nullptr, nullptr, 0, [&] {
    std::vector<int> stopped;
    const crown::mesh& m = images();
    for (int i = 0; i < m.size(); ++i)
      if (has_stopped(m.ranks()[static_cast<std::size_t>(i)])) stopped.push_back(i + 1);
    return_images(out, kind, stopped);
  });
}

/// RANDOM_INIT across images: libgfortran's gives every image the same repeatable
/// seed, or its own process-dependent one; the other two cases need the image index
/// (repeatable and distinct: the seed plus the image index) or communication (neither:
/// image 1's seed on every image of the current team; collective).
void _gfortran_caf_random_init(bool repeatable, bool image_distinct) {
  _gfortran_random_init(repeatable, image_distinct, 0); // its image argument is unused
  if (repeatable != image_distinct) return;
  guarded(nullptr, nullptr, 0, [&] {
    std::int32_t size = 0;
    _gfortran_random_seed_i4(&size, nullptr, nullptr);
    std::vector<std::int32_t> seed(static_cast<std::size_t>(size));
    descriptor d{};
    d.base_addr = seed.data();
    d.dtype = {sizeof(std::int32_t), 0, 1, bt_integer, 0};
    d.dim[0] = {1, 1, size};
    d.offset = static_cast<std::size_t>(-1);
    d.span = sizeof(std::int32_t);
    _gfortran_random_seed_i4(nullptr, nullptr, &d);
    if (repeatable)
      for (auto& s : seed) s += crown_this_image() + 1; // the initial team's index
    else
      crown::co_broadcast(images(), std::span<std::int32_t>(seed), 0);
    _gfortran_random_seed_i4(nullptr, &d, nullptr);
  });
}

} // extern "C"
