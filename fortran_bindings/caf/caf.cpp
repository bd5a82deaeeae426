// libcrown_caf: the gfortran -fcoarray=lib runtime (the _gfortran_caf_* ABI of
// gfortran 11 to 14) on Crown's heap. docs/gfortran-abi.md lists every symbol's status; those
// not here do not link, rather than misbehave.
//
// Coarrays are collective heap blocks of the current team. gfortran describes a
// transfer by a descriptor plus a byte offset into the coarray (with vector subscripts
// beside it) or by a reference chain; both become walks (caf_walk.hpp).
#include "caf_abi.hpp"
#include "caf_refs.hpp"
#include "caf_runtime.hpp"
#include "caf_status.hpp"
#include "caf_sync.hpp"
#include "caf_walk.hpp"
#include "transport/caf_interface.hpp"
#include <algorithm>
#include <crown/collectives.hpp>
#include <crown/crown.h>
#include <crown/runtime.hpp>
#include <crown/sync.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
// libgfortran's RANDOM_INIT for one image, and RANDOM_SEED.
void _gfortran_random_init(int repeatable, int image_distinct, int image);
void _gfortran_random_seed_i4(std::int32_t* size, crown::caf::descriptor* put,
                              crown::caf::descriptor* get);
}

namespace {

using namespace crown::caf;

bool is_me(int image, const char* what) {
  return rank_of(image, what) == crown::this_runtime().rank();
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
void put(const crown::caf_api::heap_block& t, int image, const walk& remote, const descriptor& src,
         int src_kind, bool may_overlap, const char* what) {
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
void get(const crown::caf_api::heap_block& t, int image, const walk& remote, const descriptor& dst,
         int dst_kind, bool may_overlap, const char* what) {
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
void copy(const crown::caf_api::heap_block& to_t, int to_image, const walk& to,
          const crown::caf_api::heap_block& from_t, int from_image, const walk& from) {
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

/// gfortran passes ERRMSG= of SYNC ALL, SYNC IMAGES and SYNC MEMORY as the address of a
/// temporary that holds the variable's address (gfc_trans_sync takes the address of the
/// string's address; seen in gfortran 11's and 12's code), unlike LOCK's and EVENT's.
/// Writing the message there would overwrite the caller's stack.
char* sync_errmsg(char* errmsg) { return errmsg ? *reinterpret_cast<char**>(errmsg) : nullptr; }

} // namespace

extern "C" {

void _gfortran_caf_init(int* argc, char*** argv) { start(argc, argv); }

int _gfortran_caf_this_image(int /*distance*/) { return images().rank() + 1; }

void _gfortran_caf_send(void* token, std::size_t offset, int image, descriptor* dest,
                        vector_subscript* dst_vector, descriptor* src, int dst_kind, int src_kind,
                        bool may_require_tmp, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    const walk remote =
        with_kind(walk_of(*dest, static_cast<std::ptrdiff_t>(offset), dst_vector), dst_kind);
    put(static_cast<token_data*>(token)->block, image, remote, *src, src_kind, may_require_tmp,
        "coarray put");
  });
}

void _gfortran_caf_get(void* token, std::size_t offset, int image, descriptor* src,
                       vector_subscript* src_vector, descriptor* dest, int src_kind, int dst_kind,
                       bool may_require_tmp, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    const walk remote =
        with_kind(walk_of(*src, static_cast<std::ptrdiff_t>(offset), src_vector), src_kind);
    get(static_cast<token_data*>(token)->block, image, remote, *dest, dst_kind, may_require_tmp,
        "coarray get");
  });
}

void _gfortran_caf_sendget(void* dst_token, std::size_t dst_offset, int dst_image, descriptor* dest,
                           vector_subscript* dst_vector, void* src_token, std::size_t src_offset,
                           int src_image, descriptor* src, vector_subscript* src_vector,
                           int dst_kind, int src_kind, bool /*may_require_tmp*/, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    copy(static_cast<token_data*>(dst_token)->block, dst_image,
         with_kind(walk_of(*dest, static_cast<std::ptrdiff_t>(dst_offset), dst_vector), dst_kind),
         static_cast<token_data*>(src_token)->block, src_image,
         with_kind(walk_of(*src, static_cast<std::ptrdiff_t>(src_offset), src_vector), src_kind));
  });
}

void _gfortran_caf_get_by_ref(void* token, int image, descriptor* dst, reference* refs,
                              int dst_kind, int src_kind, bool may_require_tmp,
                              bool dst_reallocatable, int* stat, int src_type) {
  guarded(stat, nullptr, 0, [&] {
    const auto& t = *static_cast<const token_data*>(token);
    located remote = locate(t, refs, src_type, image, "coarray get");
    remote.w = with_kind(remote.w, src_kind);
    if (dst_reallocatable) fit(*dst, remote.w);
    get(remote.block, image, remote.w, *dst, dst_kind, may_require_tmp, "coarray get");
  });
}

/// An allocatable component of another image is written, never reallocated: its shape
/// must match (dst_reallocatable is ignored).
void _gfortran_caf_send_by_ref(void* token, int image, descriptor* src, reference* refs,
                               int dst_kind, int src_kind, bool may_require_tmp,
                               bool /*dst_reallocatable*/, int* stat, int dst_type) {
  guarded(stat, nullptr, 0, [&] {
    const auto& t = *static_cast<const token_data*>(token);
    const located remote = locate(t, refs, dst_type, image, "coarray put");
    put(remote.block, image, with_kind(remote.w, dst_kind), *src, src_kind, may_require_tmp,
        "coarray put");
  });
}

void _gfortran_caf_sendget_by_ref(void* dst_token, int dst_image, reference* dst_refs,
                                  void* src_token, int src_image, reference* src_refs, int dst_kind,
                                  int src_kind, bool /*may_require_tmp*/, int* dst_stat,
                                  int* src_stat, int dst_type, int src_type) {
  if (src_stat) *src_stat = 0;
  guarded(dst_stat ? dst_stat : src_stat, nullptr, 0, [&] {
    const located to = locate(*static_cast<const token_data*>(dst_token), dst_refs, dst_type,
                              dst_image, "coarray put");
    const located from = locate(*static_cast<const token_data*>(src_token), src_refs, src_type,
                                src_image, "coarray get");
    copy(to.block, dst_image, with_kind(to.w, dst_kind), from.block, src_image,
         with_kind(from.w, src_kind));
  });
}

/// ALLOCATED(x[i]%a): whether the allocatable component `refs` ends at is allocated on
/// image i.
int _gfortran_caf_is_present(void* token, int image, reference* refs) {
  int present = 0;
  guarded(nullptr, nullptr, 0, [&] {
    present =
        locate(*static_cast<const token_data*>(token), refs, bt_derived, image, "allocated", true)
                .allocated
            ? 1
            : 0;
  });
  return present;
}

void _gfortran_caf_sync_all(int* stat, char* errmsg, std::size_t errmsg_len) {
  guarded(stat, sync_errmsg(errmsg), errmsg_len, [] { sync_team(current_team(), "sync all"); });
}

void _gfortran_caf_sync_memory(int* stat, char* errmsg, std::size_t errmsg_len) {
  guarded(stat, sync_errmsg(errmsg), errmsg_len, [] { crown::sync_memory(); });
}

void _gfortran_caf_sync_images(int count, int images[], int* stat, char* errmsg,
                               std::size_t errmsg_len) {
  errmsg = sync_errmsg(errmsg);
  // The standard forbids an image twice in the set; checked before any image is waited
  // for, this image included (it is then left out of the partners).
  std::vector<int> named(images, images + std::max(count, 0));
  std::sort(named.begin(), named.end());
  if (const auto twice = std::adjacent_find(named.begin(), named.end()); twice != named.end()) {
    fail(stat, errmsg, errmsg_len,
         "sync images: image " + std::to_string(*twice) +
             " appears more than once in the image set",
         stat_duplicate_image);
    return;
  }
  guarded(stat, errmsg, errmsg_len, [&] {
    team& t = current_team();
    const int me = t.images.rank();
    std::vector<int> partners; // 0-based, in increasing order
    for (int i = 0; i < (count < 0 ? t.images.size() : count); ++i) {
      const int image = count < 0 ? i + 1 : named[static_cast<std::size_t>(i)];
      (void)rank_of(image, "sync images");
      if (image - 1 != me) partners.push_back(image - 1);
    }
    sync_partners(t, partners);
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
    if (repeatable) {
      for (auto& s : seed) s += crown_this_image() + 1; // the initial team's index
    } else {
      enter_collective(current_team(), "random_init");
      crown::co_broadcast(images(), std::span<std::int32_t>(seed), 0);
    }
    _gfortran_random_seed_i4(nullptr, &d, nullptr);
  });
}

} // extern "C"
