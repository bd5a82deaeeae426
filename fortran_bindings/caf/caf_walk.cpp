// Walks: what a descriptor, vector subscripts or a reference chain select, and moving
// those elements to and from the image that holds a coarray.
#include "caf_walk.hpp"
#include "caf_status.hpp"
#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace crown::caf {
namespace {

std::int64_t read_index(const void* vector, std::size_t i, int kind) {
  switch (kind) {
  case 1:
    return static_cast<const std::int8_t*>(vector)[i];
  case 2:
    return static_cast<const std::int16_t*>(vector)[i];
  case 4:
    return static_cast<const std::int32_t*>(vector)[i];
  case 8:
    return static_cast<const std::int64_t*>(vector)[i];
  default:
    throw crown::argument_error("vector subscript", "integer kind " + std::to_string(kind));
  }
}

template <typename T>
T load_as(const std::byte* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}
template <typename T>
void store_as(std::byte* p, T x) {
  std::memcpy(p, &x, sizeof x);
}

bool numeric(const element& e) {
  switch (e.type) {
  case bt_integer:
    return e.size == 1 || e.size == 2 || e.size == 4 || e.size == 8;
  case bt_real:
    return e.size == 4 || e.size == 8;
  case bt_complex:
    return e.size == 8 || e.size == 16;
  default:
    return false;
  }
}

/// A numeric element's value, an integer or real as the real part. long double holds
/// every integer(8) exactly, so a conversion rounds once, as Fortran's does.
using number = std::complex<long double>;
number load_number(const std::byte* p, const element& e) {
  if (e.type == bt_complex) {
    if (e.size == 8) return number(load_as<std::complex<float>>(p));
    return number(load_as<std::complex<double>>(p));
  }
  if (e.type == bt_real) return e.size == 4 ? load_as<float>(p) : load_as<double>(p);
  switch (e.size) {
  case 1:
    return load_as<std::int8_t>(p);
  case 2:
    return load_as<std::int16_t>(p);
  case 4:
    return load_as<std::int32_t>(p);
  default:
    return static_cast<long double>(load_as<std::int64_t>(p));
  }
}

/// x truncated to T, saturated at T's range (out of range is processor-dependent in
/// Fortran and undefined in C++), NaN as 0.
template <typename T>
T truncated(long double x) {
  if (x != x) return 0;
  if (x <= static_cast<long double>(std::numeric_limits<T>::min()))
    return std::numeric_limits<T>::min();
  if (x >= static_cast<long double>(std::numeric_limits<T>::max()))
    return std::numeric_limits<T>::max();
  return static_cast<T>(x);
}

/// Stores as Fortran's intrinsic assignment converts: the real part into a real or
/// integer (truncated), both parts into a complex.
void store_number(std::byte* p, const element& e, number v) {
  if (e.type == bt_complex) {
    if (e.size == 8) return store_as(p, std::complex<float>(v));
    return store_as(p, std::complex<double>(v));
  }
  const long double x = v.real();
  if (e.type == bt_real)
    return e.size == 4 ? store_as(p, static_cast<float>(x)) : store_as(p, static_cast<double>(x));
  switch (e.size) {
  case 1:
    return store_as(p, truncated<std::int8_t>(x));
  case 2:
    return store_as(p, truncated<std::int16_t>(x));
  case 4:
    return store_as(p, truncated<std::int32_t>(x));
  default:
    return store_as(p, truncated<std::int64_t>(x));
  }
}

/// A logical of any kind as another: true is 1.
void store_logical(std::byte* to, std::size_t to_size, const std::byte* from,
                   std::size_t from_size) {
  bool value = false;
  for (std::size_t i = 0; i < from_size; ++i) value = value || from[i] != std::byte{0};
  std::memset(to, 0, to_size);
  if (value) to[0] = std::byte{1}; // little-endian
}

/// A string into one of another length or kind (1, or 4 for ISO 10646), character by
/// character: truncated, or padded with blanks. A code a kind-1 string cannot hold
/// becomes '?'.
void store_string(std::byte* to, const element& t, const std::byte* from, const element& f) {
  const auto fk = static_cast<std::size_t>(f.char_kind()),
             tk = static_cast<std::size_t>(t.char_kind());
  const std::size_t nf = f.size / fk, nt = t.size / tk;
  for (std::size_t i = 0; i < nt; ++i) {
    std::uint32_t code = ' ';
    if (i < nf) {
      if (fk == 4)
        std::memcpy(&code, from + 4 * i, 4);
      else
        code = static_cast<std::uint8_t>(from[i]);
    }
    if (tk == 4)
      std::memcpy(to + 4 * i, &code, 4);
    else
      to[i] = static_cast<std::byte>(code < 256 ? code : '?');
  }
}

/// Crown's strided layout for a walk that fits one (at most 3 dimensions with more
/// than one element, no vector subscripts, no negative steps).
bool as_strided(const walk& w, std::uint64_t base, crown::caf_api::strided& s) {
  std::vector<const axis*> used;
  for (const axis& a : w.axes) {
    if (!a.list.empty() || a.step < 0) return false;
    if (a.count > 1) used.push_back(&a);
  }
  if (used.size() > 3) return false;
  s = crown::caf_api::strided{};
  s.offset = base + static_cast<std::uint64_t>(w.first);
  s.elem = w.elem.size;
  s.dims = std::max<std::size_t>(used.size(), 1);
  s.count[0] = 1;
  s.stride[0] = w.elem.size;
  for (std::size_t k = 0; k < used.size(); ++k) { // Crown's layout is row-major
    s.count[used.size() - 1 - k] = used[k]->count;
    s.stride[used.size() - 1 - k] = static_cast<std::size_t>(used[k]->step);
  }
  return true;
}

/// Copies k elements of `elem` bytes, `from_step` and `to_step` bytes apart.
template <std::size_t Size>
void copy_elements(const std::byte* from, std::ptrdiff_t from_step, std::byte* to,
                   std::ptrdiff_t to_step, std::size_t k) {
  for (std::size_t i = 0; i < k; ++i, from += from_step, to += to_step)
    std::memcpy(to, from, Size); // a fixed size: one load and one store
}

void copy_row(const std::byte* from, std::ptrdiff_t from_step, std::byte* to,
              std::ptrdiff_t to_step, std::size_t k, std::size_t elem) {
  const auto packed = static_cast<std::ptrdiff_t>(elem);
  if (from_step == packed && to_step == packed) return (void)std::memmove(to, from, k * elem);
  switch (elem) {
  case 4:
    return copy_elements<4>(from, from_step, to, to_step, k);
  case 8:
    return copy_elements<8>(from, from_step, to, to_step, k);
  case 16:
    return copy_elements<16>(from, from_step, to, to_step, k);
  default:
    for (std::size_t i = 0; i < k; ++i, from += from_step, to += to_step)
      std::memcpy(to, from, elem);
  }
}

/// Goes through a walk's elements row by row: a row is a stretch along axes[0] (one
/// element when axes[0] is a vector subscript).
class cursor {
public:
  explicit cursor(const walk& w)
      : w_(w), rows_along_first_(!w.axes.empty() && w.axes[0].list.empty()),
        index_(w.axes.size(), 0) {
    start_row();
  }
  [[nodiscard]] std::ptrdiff_t offset() const noexcept { return offset_; }
  [[nodiscard]] std::ptrdiff_t step() const noexcept { return step_; }
  [[nodiscard]] std::size_t left() const noexcept { return left_; }
  /// Moves k elements on (k <= left()).
  void advance(std::size_t k) {
    left_ -= k;
    offset_ += step_ * static_cast<std::ptrdiff_t>(k);
    if (left_) return;
    for (std::size_t d = rows_along_first_ ? 1 : 0; d < index_.size(); ++d) { // odometer
      if (++index_[d] < w_.axes[d].size()) return start_row();
      index_[d] = 0;
    }
  }

private:
  void start_row() {
    offset_ = w_.first;
    for (std::size_t d = 0; d < index_.size(); ++d) offset_ += w_.axes[d].at(index_[d]);
    step_ = rows_along_first_ ? w_.axes[0].step : 0;
    left_ = rows_along_first_ ? w_.axes[0].count : 1;
  }
  const walk& w_;
  bool rows_along_first_;
  std::vector<std::size_t> index_;
  std::ptrdiff_t offset_ = 0, step_ = 0;
  std::size_t left_ = 0;
};

} // namespace

// How many of lo, lo + step, ... lie between lo and hi (Fortran's triplet; 0 when none).
std::size_t count_of(std::ptrdiff_t lo, std::ptrdiff_t hi, std::ptrdiff_t step, const char* what) {
  if (step == 0) throw crown::argument_error(what, "a zero stride");
  const std::ptrdiff_t count = (hi - lo + step) / step;
  return count > 0 ? static_cast<std::size_t>(count) : 0;
}

// The elements lo..hi by step of a dimension whose index `lower` is at byte 0 and whose
/// neighbours are `scale` bytes apart; adds the offset of `lo` to `first`.
axis progression(std::ptrdiff_t lo, std::ptrdiff_t hi, std::ptrdiff_t step, std::ptrdiff_t lower,
                 std::ptrdiff_t scale, std::ptrdiff_t& first, const char* what) {
  first += (lo - lower) * scale;
  return axis{step * scale, count_of(lo, hi, step, what), {}};
}

std::size_t walk::elements() const noexcept {
  std::size_t n = 1;
  for (const axis& a : axes) n *= a.size();
  return n;
}

bool walk::contiguous() const noexcept {
  auto expected = static_cast<std::ptrdiff_t>(elem.size);
  for (const axis& a : axes) {
    if (a.size() == 1) continue;
    if (!a.list.empty() || a.step != expected) return false;
    expected *= static_cast<std::ptrdiff_t>(a.count);
  }
  return true;
}

walk walk_of(const descriptor& d, std::ptrdiff_t offset, const vector_subscript* vector,
             span_rule rule) {
  walk w;
  w.first = offset;
  w.elem = d.elem();
  for (int k = 0; k < d.rank(); ++k) {
    if (!vector) {
      w.axes.push_back(axis{d.byte_stride(k, rule), d.extent(k), {}});
      continue;
    }
    // With vector subscripts the descriptor keeps the coarray's bounds and strides;
    // the selection is in Fortran indices.
    const vector_subscript& v = vector[k];
    const std::ptrdiff_t lower = d.dim[k].lower_bound, scale = d.byte_stride(k, rule);
    if (v.nvec == 0) {
      w.axes.push_back(progression(v.u.triplet.lower_bound, v.u.triplet.upper_bound,
                                   v.u.triplet.stride, lower, scale, w.first, "coarray section"));
      continue;
    }
    axis a;
    for (std::size_t i = 0; i < v.nvec; ++i)
      a.list.push_back((read_index(v.u.v.vector, i, v.u.v.kind) - lower) * scale);
    w.axes.push_back(std::move(a));
  }
  return w;
}

void copy(const walk& from, const void* from_base, const walk& to, void* to_base) {
  std::size_t n = from.elements();
  cursor a(from), b(to);
  const auto* src = static_cast<const std::byte*>(from_base);
  auto* dst = static_cast<std::byte*>(to_base);
  while (n) {
    const std::size_t k = std::min({a.left(), b.left(), n});
    copy_row(src + a.offset(), a.step(), dst + b.offset(), b.step(), k, from.elem.size);
    a.advance(k);
    b.advance(k);
    n -= k;
  }
}

walk packed_walk(std::size_t count, const element& e) {
  return walk{0, e, {axis{static_cast<std::ptrdiff_t>(e.size), count, {}}}};
}

void pack(const walk& w, const void* base, std::byte* to) {
  copy(w, base, packed_walk(w.elements(), w.elem), to);
}

void unpack(const std::byte* from, const walk& w, void* base) {
  copy(packed_walk(w.elements(), w.elem), from, w, base);
}

std::byte* scratch(int slot, std::size_t bytes) {
  thread_local std::vector<std::byte> buffers[2]; // grown, never shrunk: no fresh pages
  auto& b = buffers[slot];
  if (b.size() < bytes) b.resize(bytes);
  return b.data();
}

std::vector<std::byte> convert(const std::byte* in, std::size_t count, const element& from,
                               const element& to) {
  std::vector<std::byte> out(count * to.size);
  if (from == to) {
    std::memcpy(out.data(), in, out.size());
    return out;
  }
  std::byte* at = out.data();
  if (numeric(from) && numeric(to)) {
    for (std::size_t i = 0; i < count; ++i, in += from.size, at += to.size)
      store_number(at, to, load_number(in, from));
  } else if (from.type == bt_logical && to.type == bt_logical) {
    for (std::size_t i = 0; i < count; ++i, in += from.size, at += to.size)
      store_logical(at, to.size, in, from.size);
  } else if (from.type == bt_character && to.type == bt_character) {
    for (std::size_t i = 0; i < count; ++i, in += from.size, at += to.size)
      store_string(at, to, in, from);
  } else {
    throw crown::argument_error("coarray transfer",
                                "no conversion from " + from.text() + " to " + to.text());
  }
  return out;
}

namespace {

void check_bounds(int image, const crown::caf_api::heap_block& t, const walk& w, const char* what) {
  std::ptrdiff_t lo = w.first, hi = w.first + static_cast<std::ptrdiff_t>(w.elem.size);
  for (const axis& a : w.axes) {
    if (a.list.empty()) {
      const std::ptrdiff_t last = a.at(a.size() - 1);
      lo += std::min<std::ptrdiff_t>(0, last);
      hi += std::max<std::ptrdiff_t>(0, last);
    } else {
      const auto [low, high] = std::minmax_element(a.list.begin(), a.list.end());
      lo += *low;
      hi += *high;
    }
  }
  if (lo < 0 || hi > static_cast<std::ptrdiff_t>(t.bytes))
    throw crown::argument_error(what, "image " + std::to_string(image) +
                                          ": the section spans bytes [" + std::to_string(lo) +
                                          ", " + std::to_string(hi) + ") of " +
                                          std::to_string(t.bytes) +
                                          " (a coarray, or an allocatable component's data): out "
                                          "of bounds");
}

/// transfer() once the walk is checked: one strided transfer when it fits Crown's
/// layout, else row by row (a row of packed elements at a time where there is one).
void transfer_checked(bool put, int rank, const crown::caf_api::heap_block& t, const walk& w,
                      std::byte* packed) {
  crown::caf_api::strided s;
  if (as_strided(w, t.offset, s)) {
    if (put)
      crown::caf_api::remote_put_strided(rank, s, packed);
    else
      crown::caf_api::remote_get_strided(rank, s, packed);
    return;
  }
  const std::size_t elem = w.elem.size;
  cursor c(w);
  for (std::size_t n = w.elements(); n;) {
    const std::size_t k = c.step() == static_cast<std::ptrdiff_t>(elem) ? c.left() : 1;
    const std::uint64_t where = t.offset + static_cast<std::uint64_t>(c.offset());
    if (put)
      crown::caf_api::remote_put(rank, where, packed, k * elem);
    else
      crown::caf_api::remote_get(rank, where, packed, k * elem);
    packed += k * elem;
    c.advance(k);
    n -= k;
  }
}

} // namespace

void transfer(bool put, int image, const crown::caf_api::heap_block& t, const walk& w,
              std::byte* packed, const char* what) {
  if (!w.elements()) return;
  const int rank = reachable_rank(image, what);
  check_bounds(image, t, w, what);
  transfer_checked(put, rank, t, w, packed);
}

void move(bool put, int image, const crown::caf_api::heap_block& t, const walk& remote,
          const walk& local, void* base, const char* what) {
  if (!remote.elements()) return;
  const int rank = reachable_rank(image, what);
  check_bounds(image, t, remote, what);
  if (std::byte* peer = crown::caf_api::heap_peer_address(rank, t.offset)) { // load/store
    if (put)
      copy(local, base, remote, peer);
    else
      copy(remote, peer, local, base);
    return;
  }
  if (local.contiguous())
    return transfer_checked(put, rank, t, remote, static_cast<std::byte*>(base) + local.first);
  std::byte* packed = scratch(0, local.elements() * local.elem.size);
  if (put) pack(local, base, packed);
  transfer_checked(put, rank, t, remote, packed);
  if (!put) unpack(packed, local, base);
}

packed_array::packed_array(const descriptor& a) : w(walk_of(a, 0, nullptr, span_rule::ignored)) {
  const std::size_t size = w.elements() * w.elem.size;
  if (w.contiguous()) {
    bytes = {static_cast<std::byte*>(a.base_addr) + w.first, size};
    return;
  }
  copy.resize(size);
  bytes = copy;
  pack(w, a.base_addr, bytes.data());
}

void packed_array::store(const descriptor& a) const {
  if (!copy.empty()) unpack(bytes.data(), w, a.base_addr);
}

void fit(descriptor& d, const walk& w) {
  if (static_cast<std::size_t>(d.rank()) != w.axes.size())
    throw crown::argument_error("coarray get", "a rank-" + std::to_string(w.axes.size()) +
                                                   " section into a rank-" +
                                                   std::to_string(d.rank()) + " variable");
  bool same = d.base_addr != nullptr;
  for (int i = 0; same && i < d.rank(); ++i) same = d.extent(i) == w.axes[i].size();
  if (same) return;
  std::free(d.base_addr);
  const std::size_t elem = d.dtype.elem_len;
  d.base_addr = std::malloc(std::max<std::size_t>(w.elements() * elem, 1));
  if (!d.base_addr) throw std::bad_alloc();
  std::ptrdiff_t stride = 1, offset = 0;
  for (int i = 0; i < d.rank(); ++i) { // lower bounds 1, as for c = a(:)[i]
    const auto extent = static_cast<std::ptrdiff_t>(w.axes[i].size());
    d.dim[i] = {stride, 1, extent};
    offset -= stride;
    stride *= extent;
  }
  d.offset = static_cast<std::size_t>(offset);
  d.span = static_cast<std::ptrdiff_t>(elem);
}

} // namespace crown::caf
