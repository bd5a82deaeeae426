// libcrown_caf: the gfortran -fcoarray=lib runtime (the _gfortran_caf_* ABI of
// gfortran 12) on Crown's heap. Only what README's table marks as done is here; the
// rest does not link yet, rather than misbehave.
//
// Coarrays are collective heap blocks on the world mesh; a transfer is described by
// gfortran as a descriptor plus a byte offset into the coarray, its elements walked in
// Fortran (column-major) order.
#include "caf_abi.hpp"
#include <complex>
#include <crown/collectives.hpp>
#include <crown/crown.h>
#include <crown/detail/heap.hpp>
#include <crown/detail/types.hpp>
#include <crown/detail/wait.hpp>
#include <crown/runtime.hpp>
#include <crown/sync.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

extern "C" void _gfortran_caf_finalize(void);

namespace {

using namespace crown::caf;

struct token_data {
  crown::detail::heap_block block;
  const descriptor* desc = nullptr; ///< an allocatable coarray's (same bounds everywhere)
};

/// Every registered coarray (freed at the end if the program did not: static
/// coarrays never are).
std::set<token_data*> g_tokens;

/// Locks, events and critical sections: one 8-byte word per element.
constexpr std::size_t word = sizeof(std::int64_t);

/// Starts Crown on first use: gfortran registers static coarrays before it calls
/// _gfortran_caf_init.
void start(int* argc, char*** argv) {
  if (crown_initialized()) return;
  if (crown_init(argc, argv) != CROWN_OK) {
    std::fprintf(stderr, "crown caf: %s\n", crown_last_error());
    std::exit(1);
  }
}

const crown::mesh& world() {
  start(nullptr, nullptr);
  return crown::this_runtime().world();
}

/// Reports a failure: into stat/errmsg when the program gave them, else it stops the
/// job with the message (Fortran's rule for statements without stat=).
void fail(int* stat, char* errmsg, std::size_t errmsg_len, const std::string& message) {
  if (stat) {
    *stat = 1;
    if (errmsg && errmsg_len) {
      const std::size_t n = std::min(errmsg_len, message.size());
      std::memcpy(errmsg, message.data(), n);
      std::memset(errmsg + n, ' ', errmsg_len - n); // Fortran strings are blank-padded
    }
    return;
  }
  std::fprintf(stderr, "ERROR STOP crown caf: image %d: %s\n", crown_this_image() + 1,
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

template <typename F>
void guarded(int* stat, char* errmsg, std::size_t errmsg_len, F&& f) {
  try {
    if (stat) *stat = 0;
    f();
  } catch (const std::exception& e) {
    fail(stat, errmsg, errmsg_len, e.what());
  }
}

int world_rank_of(int image, const char* what) {
  const crown::mesh& w = world();
  if (image < 1 || image > w.size())
    throw crown::argument_error(what, "image " + std::to_string(image) +
                                          " out of range 1:" + std::to_string(w.size()));
  return w.ranks()[static_cast<std::size_t>(image - 1)];
}

/// The world rank of a 1-based image; 0 means this image (atomics, locks, events
/// without a coindex).
int rank_or_self(int image, const char* what) {
  return image == 0 ? world().rank() : world_rank_of(image, what);
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

/// A numeric value read from / written to memory of a gfortran type and kind.
double load_real(const void* p, const element& e) {
  if (e.type == bt_real)
    return e.size == 4 ? *static_cast<const float*>(p) : *static_cast<const double*>(p);
  switch (e.size) {
  case 1:
    return *static_cast<const std::int8_t*>(p);
  case 2:
    return *static_cast<const std::int16_t*>(p);
  case 4:
    return *static_cast<const std::int32_t*>(p);
  default:
    return static_cast<double>(*static_cast<const std::int64_t*>(p));
  }
}
void store_real(void* p, const element& e, double v) {
  if (e.type == bt_real) {
    if (e.size == 4)
      *static_cast<float*>(p) = static_cast<float>(v);
    else
      *static_cast<double*>(p) = v;
    return;
  }
  switch (e.size) { // Fortran converts real to integer by truncation
  case 1:
    *static_cast<std::int8_t*>(p) = static_cast<std::int8_t>(v);
    break;
  case 2:
    *static_cast<std::int16_t*>(p) = static_cast<std::int16_t>(v);
    break;
  case 4:
    *static_cast<std::int32_t*>(p) = static_cast<std::int32_t>(v);
    break;
  default:
    *static_cast<std::int64_t*>(p) = static_cast<std::int64_t>(v);
    break;
  }
}

/// `count` packed elements of type `from` as packed elements of type `to` (integer and
/// real kinds; anything else must match exactly).
std::vector<std::byte> convert(const std::byte* in, std::size_t count, const element& from,
                               const element& to) {
  std::vector<std::byte> out(count * to.size);
  if (from == to) {
    std::memcpy(out.data(), in, out.size());
    return out;
  }
  const auto numeric = [](const element& e) {
    return (e.type == bt_integer && (e.size == 1 || e.size == 2 || e.size == 4 || e.size == 8)) ||
           (e.type == bt_real && (e.size == 4 || e.size == 8));
  };
  if (!numeric(from) || !numeric(to))
    throw crown::argument_error("coarray transfer",
                                "no conversion from " + from.text() + " to " + to.text());
  for (std::size_t i = 0; i < count; ++i)
    store_real(out.data() + i * to.size, to, load_real(in + i * from.size, from));
  return out;
}

/// Copies between a packed buffer and the elements a descriptor walks in local memory.
void pack(const descriptor& d, std::byte* to) {
  const element e = d.elem();
  const auto offsets = d.element_offsets();
  for (std::size_t i = 0; i < offsets.size(); ++i)
    std::memcpy(to + i * e.size,
                static_cast<const std::byte*>(d.base_addr) +
                    offsets[i] * static_cast<std::ptrdiff_t>(e.size),
                e.size);
}
void unpack(const std::byte* from, const descriptor& d) {
  const element e = d.elem();
  const auto offsets = d.element_offsets();
  for (std::size_t i = 0; i < offsets.size(); ++i)
    std::memcpy(static_cast<std::byte*>(d.base_addr) +
                    offsets[i] * static_cast<std::ptrdiff_t>(e.size),
                from + i * e.size, e.size);
}

/// What a put sends into `n` target elements of type `to`: the source packed (a copy,
/// so that source and target may overlap), a scalar repeated, converted.
std::vector<std::byte> source_for(const descriptor& src, std::size_t n, const element& to) {
  std::vector<std::byte> packed(src.elements() * src.elem().size);
  pack(src, packed.data());
  if (src.elements() == 1 && n > 1) { // a scalar assigned to a section
    std::vector<std::byte> many(n * packed.size());
    for (std::size_t i = 0; i < n; ++i)
      std::memcpy(many.data() + i * packed.size(), packed.data(), packed.size());
    packed = std::move(many);
  } else if (src.elements() != n) {
    throw crown::argument_error("coarray put", std::to_string(src.elements()) +
                                                   " elements for a section of " +
                                                   std::to_string(n));
  }
  return convert(packed.data(), n, src.elem(), to);
}

/// Moves `count` elements between a packed buffer here and the elements of a remote
/// coarray that `remote` walks (its strides; base = coarray start + offset).
void transfer(bool put, int rank, std::uint64_t base, const descriptor& remote, std::byte* packed) {
  const element e = remote.elem();
  crown::detail::strided s;
  if (remote.as_strided(base, s)) {
    if (put)
      crown::detail::remote_put_strided(rank, s, packed);
    else
      crown::detail::remote_get_strided(rank, s, packed);
    return;
  }
  const auto offsets = remote.element_offsets(); // negative strides, rank > 3
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    const auto at = static_cast<std::uint64_t>(static_cast<std::int64_t>(base) +
                                               offsets[i] * static_cast<std::int64_t>(e.size));
    if (put)
      crown::detail::remote_put(rank, at, packed + i * e.size, e.size);
    else
      crown::detail::remote_get(rank, at, packed + i * e.size, e.size);
  }
}

template <typename F>
void with_numeric(const element& e, const char* what, F&& f) {
  if (e.type == bt_integer && e.size == 4) return f(std::int32_t{});
  if (e.type == bt_integer && e.size == 8) return f(std::int64_t{});
  if (e.type == bt_real && e.size == 4) return f(float{});
  if (e.type == bt_real && e.size == 8) return f(double{});
  if (e.type == bt_complex && e.size == 8) return f(std::complex<float>{});
  if (e.type == bt_complex && e.size == 16) return f(std::complex<double>{});
  throw crown::argument_error(what, "no reduction for " + e.text());
}

/// Runs a co_* collective over the whole data of `a` (packed if it is not contiguous).
template <typename Reduce>
void collective(descriptor* a, const char* what, Reduce&& reduce) {
  const element e = a->elem();
  const std::size_t n = a->elements();
  std::vector<std::byte> buffer(n * e.size);
  pack(*a, buffer.data());
  with_numeric(e, what, [&](auto zero) {
    using T = decltype(zero);
    reduce(std::span<T>(reinterpret_cast<T*>(buffer.data()), n));
  });
  unpack(buffer.data(), *a);
}

/// co_min and co_max (complex numbers are refused by co_builtin).
void ordered(descriptor* a, int result_image, crown::detail::reduction op) {
  const char* what = op == crown::detail::reduction::min ? "co_min" : "co_max";
  collective(a, what, [&](auto data) {
    crown::detail::co_builtin(world(), data, op, result_image - 1, what);
  });
}

[[noreturn]] void stop(int code, const char* text, std::size_t len, bool error, bool quiet) {
  std::fflush(stdout);
  if (!quiet) {
    if (text)
      std::fprintf(stderr, "%s %.*s\n", error ? "ERROR STOP" : "STOP", static_cast<int>(len), text);
    else if (error || code)
      std::fprintf(stderr, "%s %d\n", error ? "ERROR STOP" : "STOP", code);
  }
  std::fflush(stderr);
  if (error) MPI_Abort(MPI_COMM_WORLD, code ? code : 1); // every image ends
  _gfortran_caf_finalize(); // a normal stop: this image's part of finalisation
  std::exit(code);
}

/// What a reference chain selects in the coarray: a walk (as a descriptor whose
/// strides are in elements, base_addr unused) starting `first` elements in.
struct selection {
  descriptor walk{};
  std::ptrdiff_t first = 0;
};

selection select(const token_data& t, const reference* ref, const char* what) {
  if (!ref || ref->next || (ref->type != caf_ref_array && ref->type != caf_ref_static_array))
    throw crown::argument_error(what, "only a single array reference is supported yet (no "
                                      "derived-type components)");
  selection out;
  int rank = 0;
  for (int d = 0; d < 15 && ref->u.a.mode[d] != caf_arr_none; ++d) {
    const unsigned char mode = ref->u.a.mode[d];
    const auto& s = ref->u.a.dim[d].s;
    if (mode == caf_arr_vector)
      throw crown::argument_error(what, "vector subscripts are not supported yet");
    std::ptrdiff_t start = s.start, end = s.end, step = s.stride, scale = 1, lower = 0;
    if (ref->type == caf_ref_array) { // Fortran indices, within the descriptor's bounds
      if (!t.desc || d >= t.desc->rank())
        throw crown::argument_error(what, "an array reference beyond the coarray's rank");
      lower = t.desc->dim[d].lower_bound;
      scale = t.desc->dim[d].stride;
      if (mode == caf_arr_full || mode == caf_arr_open_start) start = lower;
      if (mode == caf_arr_full || mode == caf_arr_open_end) end = t.desc->dim[d].ubound;
      if (mode == caf_arr_full) step = 1;
      if (mode == caf_arr_open_end || mode == caf_arr_open_start) step = s.stride ? s.stride : 1;
    }
    if (mode == caf_arr_single) {
      out.first += (start - lower) * scale;
      continue;
    }
    if (step == 0) throw crown::argument_error(what, "a zero stride");
    const std::ptrdiff_t count = (end - start) / step + 1;
    out.first += (start - lower) * scale;
    out.walk.dim[rank] = {step * scale, 0, count > 0 ? count - 1 : -1};
    ++rank;
  }
  out.walk.dtype.rank = static_cast<signed char>(rank);
  out.walk.dtype.elem_len = ref->item_size;
  return out;
}

/// Makes an allocatable destination fit `extents` (gfortran allocates with malloc).
void fit(descriptor& d, const descriptor& shape) {
  bool same = d.base_addr && d.rank() == shape.rank();
  for (int i = 0; same && i < shape.rank(); ++i) same = d.extent(i) == shape.extent(i);
  if (same) return;
  std::free(d.base_addr);
  const std::size_t elem = d.dtype.elem_len;
  d.base_addr = std::malloc(std::max<std::size_t>(shape.elements() * elem, 1));
  if (!d.base_addr) throw std::bad_alloc();
  std::ptrdiff_t stride = 1, offset = 0;
  for (int i = 0; i < shape.rank(); ++i) { // lower bounds 1, as for c = a(:)[i]
    const auto extent = static_cast<std::ptrdiff_t>(shape.extent(i));
    d.dim[i] = {stride, 1, extent};
    offset -= stride;
    stride *= extent;
  }
  d.offset = static_cast<std::size_t>(offset);
  d.span = static_cast<std::ptrdiff_t>(elem);
}

} // namespace

extern "C" {

void _gfortran_caf_init(int* argc, char*** argv) { start(argc, argv); }

void _gfortran_caf_finalize(void) {
  for (token_data* t : g_tokens) delete t; // their memory goes with the heap
  g_tokens.clear();
  crown_finalize();
}

int _gfortran_caf_this_image(int /*distance*/) { return crown_this_image() + 1; }
int _gfortran_caf_num_images(int /*distance*/, int /*failed*/) { return crown_num_images(); }

void _gfortran_caf_register(std::size_t size, int type, void** token, descriptor* desc, int* stat,
                            char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    // For locks, events and critical sections `size` counts elements.
    const bool words = type >= caf_register_lock_static && type <= caf_register_event_alloc;
    if (type != caf_register_static && type != caf_register_alloc && !words)
      throw crown::argument_error("coarray registration",
                                  "registration type " + std::to_string(type) +
                                      " (coarray components) is not supported yet");
    const std::size_t bytes = std::max<std::size_t>(size, 1) * (words ? word : 1);
    auto* t = new token_data{
        crown::detail::heap_allocate(world(), bytes, 0x63616600u + (words ? 1 : 0), "coarray")};
    if (words) std::memset(crown::detail::heap_address(t->block.offset), 0, bytes);
    *token = t;
    if (desc) desc->base_addr = crown::detail::heap_address(t->block.offset);
    if (type == caf_register_alloc) t->desc = desc;
    g_tokens.insert(t);
  });
}

void _gfortran_caf_deregister(void** token, int /*type*/, int* stat, char* errmsg,
                              std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    auto* t = static_cast<token_data*>(*token);
    if (!t) throw crown::state_error("coarray deallocation", "not allocated");
    crown::detail::heap_release(world(), t->block);
    g_tokens.erase(t);
    delete t;
    *token = nullptr;
  });
}

void _gfortran_caf_send(void* token, std::size_t offset, int image, descriptor* dest,
                        void* /*dst_vector*/, descriptor* src, int /*dst_kind*/, int /*src_kind*/,
                        bool /*may_require_tmp*/, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    const int rank = world_rank_of(image, "coarray put");
    const std::size_t n = dest->elements();
    if (!n) return;
    auto converted = source_for(*src, n, dest->elem());
    const auto* t = static_cast<token_data*>(token);
    transfer(true, rank, t->block.offset + offset, *dest, converted.data());
  });
}

void _gfortran_caf_get(void* token, std::size_t offset, int image, descriptor* src,
                       void* /*src_vector*/, descriptor* dest, int /*src_kind*/, int /*dst_kind*/,
                       bool /*may_require_tmp*/, int* stat) {
  guarded(stat, nullptr, 0, [&] {
    const int rank = world_rank_of(image, "coarray get");
    const std::size_t n = src->elements();
    if (!n) return;
    if (dest->elements() != n)
      throw crown::argument_error("coarray get", std::to_string(n) + " elements into " +
                                                     std::to_string(dest->elements()));
    std::vector<std::byte> packed(n * src->elem().size);
    const auto* t = static_cast<token_data*>(token);
    transfer(false, rank, t->block.offset + offset, *src, packed.data());
    const auto converted = convert(packed.data(), n, src->elem(), dest->elem());
    unpack(converted.data(), *dest);
  });
}

void _gfortran_caf_sendget(void* dst_token, std::size_t dst_offset, int dst_image, descriptor* dest,
                           void* /*dst_vector*/, void* src_token, std::size_t src_offset,
                           int src_image, descriptor* src, void* /*src_vector*/, int /*dst_kind*/,
                           int /*src_kind*/, bool /*may_require_tmp*/, int* stat) {
  guarded(stat, nullptr, 0, [&] { // through a buffer here: a(:)[i] = b(:)[j]
    const int from = world_rank_of(src_image, "coarray get");
    const int to = world_rank_of(dst_image, "coarray put");
    const std::size_t n = src->elements();
    if (dest->elements() != n)
      throw crown::argument_error("coarray copy", std::to_string(n) + " elements into " +
                                                      std::to_string(dest->elements()));
    if (!n) return;
    std::vector<std::byte> packed(n * src->elem().size);
    transfer(false, from, static_cast<token_data*>(src_token)->block.offset + src_offset, *src,
             packed.data());
    auto converted = convert(packed.data(), n, src->elem(), dest->elem());
    transfer(true, to, static_cast<token_data*>(dst_token)->block.offset + dst_offset, *dest,
             converted.data());
  });
}

void _gfortran_caf_get_by_ref(void* token, int image, descriptor* dst, reference* refs,
                              int /*dst_kind*/, int /*src_kind*/, bool /*may_require_tmp*/,
                              bool dst_reallocatable, int* stat, int src_type) {
  guarded(stat, nullptr, 0, [&] {
    const int rank = world_rank_of(image, "coarray get");
    const auto& t = *static_cast<const token_data*>(token);
    selection sel = select(t, refs, "coarray get");
    sel.walk.dtype.type = static_cast<signed char>(src_type);
    const std::size_t n = sel.walk.elements();
    if (dst_reallocatable) fit(*dst, sel.walk);
    if (dst->elements() != n)
      throw crown::argument_error("coarray get", std::to_string(n) + " elements into " +
                                                     std::to_string(dst->elements()));
    if (!n) return;
    std::vector<std::byte> packed(n * sel.walk.elem().size);
    transfer(false, rank, t.block.offset + static_cast<std::uint64_t>(sel.first) * refs->item_size,
             sel.walk, packed.data());
    const auto converted = convert(packed.data(), n, sel.walk.elem(), dst->elem());
    unpack(converted.data(), *dst);
  });
}

void _gfortran_caf_send_by_ref(void* token, int image, descriptor* src, reference* refs,
                               int /*dst_kind*/, int /*src_kind*/, bool /*may_require_tmp*/,
                               bool /*dst_reallocatable*/, int* stat, int dst_type) {
  guarded(stat, nullptr, 0, [&] {
    const int rank = world_rank_of(image, "coarray put");
    const auto& t = *static_cast<const token_data*>(token);
    selection sel = select(t, refs, "coarray put");
    sel.walk.dtype.type = static_cast<signed char>(dst_type);
    const std::size_t n = sel.walk.elements();
    if (!n) return;
    auto converted = source_for(*src, n, sel.walk.elem());
    transfer(true, rank, t.block.offset + static_cast<std::uint64_t>(sel.first) * refs->item_size,
             sel.walk, converted.data());
  });
}

void _gfortran_caf_lock(void* token, std::size_t index, int image, int* acquired, int* stat,
                        char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const int rank = rank_or_self(image, "lock");
    const std::int64_t me = world().rank() + 1; // the holder's image, 0 when free
    crown::detail::backoff pause;
    for (;;) {
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
    const std::int64_t me = world().rank() + 1;
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
                                           : "the lock is held by image " + std::to_string(holder));
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
    const int me = world().rank();
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
  guarded(stat, errmsg, errmsg_len, [] { crown::sync_all(world()); });
}

void _gfortran_caf_sync_memory(int* stat, char* errmsg, std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [] { crown::sync_memory(); });
}

void _gfortran_caf_sync_images(int count, int images[], int* stat, char* errmsg,
                               std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const crown::mesh& w = world();
    std::vector<int> zero_based;
    if (count < 0) { // sync images (*)
      for (int i = 0; i < w.size(); ++i)
        if (i != w.rank()) zero_based.push_back(i);
    } else {
      for (int i = 0; i < count; ++i) {
        (void)world_rank_of(images[i], "sync images");
        if (images[i] - 1 != w.rank()) zero_based.push_back(images[i] - 1);
      }
    }
    crown::sync_images(w, zero_based);
  });
}

void _gfortran_caf_co_sum(descriptor* a, int result_image, int* stat, char* errmsg,
                          std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    collective(a, "co_sum", [&](auto data) { crown::co_sum(world(), data, result_image - 1); });
  });
}

void _gfortran_caf_co_min(descriptor* a, int result_image, int* stat, char* errmsg, int /*a_len*/,
                          std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len,
          [&] { ordered(a, result_image, crown::detail::reduction::min); });
}

void _gfortran_caf_co_max(descriptor* a, int result_image, int* stat, char* errmsg, int /*a_len*/,
                          std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len,
          [&] { ordered(a, result_image, crown::detail::reduction::max); });
}

void _gfortran_caf_co_broadcast(descriptor* a, int source_image, int* stat, char* errmsg,
                                std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    (void)world_rank_of(source_image, "co_broadcast");
    const element e = a->elem();
    std::vector<std::byte> buffer(a->elements() * e.size);
    pack(*a, buffer.data());
    crown::co_broadcast(world(), std::span<std::byte>(buffer), source_image - 1);
    unpack(buffer.data(), *a);
  });
}

void _gfortran_caf_stop_numeric(int code, bool quiet) { stop(code, nullptr, 0, false, quiet); }
void _gfortran_caf_stop_str(const char* text, std::size_t len, bool quiet) {
  stop(0, text, len, false, quiet);
}
void _gfortran_caf_error_stop(int code, bool quiet) { stop(code, nullptr, 0, true, quiet); }
void _gfortran_caf_error_stop_str(const char* text, std::size_t len, bool quiet) {
  stop(1, text, len, true, quiet);
}

} // extern "C"
