// libcrown_caf's reductions (co_sum, co_min, co_max, co_reduce) over the images of the
// current team (co_broadcast: caf_broadcast.cpp).
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include "caf_status.hpp"
#include "caf_walk.hpp"
#include <algorithm>
#include <complex>
#include <crown/collectives.hpp>
#include <crown/detail/types.hpp>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace {

using namespace crown::caf;

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

/// Runs a built-in co_* collective over the data of `a`.
template <typename Reduce>
void collective(const descriptor& a, const char* what, Reduce&& reduce) {
  enter_collective(current_team(), what);
  packed_array data(a);
  with_numeric(data.w.elem, what, [&](auto zero) {
    using T = decltype(zero);
    reduce(std::span<T>(reinterpret_cast<T*>(data.bytes.data()), data.w.elements()));
  });
  data.store(a);
}

/// Reduces `a` element by element with op(x, y, out) on raw elements, in image order
/// ((x1 op x2) op x3 ...), into every image (result_image 0) or one.
template <typename Op>
void reduce_in_order(const descriptor& a, int result_image, const char* what, Op&& op) {
  if (result_image) (void)rank_of(result_image, what);
  enter_collective(current_team(), what);
  packed_array data(a);
  const element e = data.w.elem;
  const std::uint64_t tag = (static_cast<std::uint64_t>(e.type) << 32 | e.size) << 1;
  const auto all = crown::caf_api::co_gather_bytes(images(), data.bytes.data(), data.bytes.size(),
                                                   tag, result_image - 1, what);
  if (all.empty()) return; // not the result image
  const std::size_t bytes = data.bytes.size(), n = data.w.elements();
  std::memcpy(data.bytes.data(), all.data(), bytes);
  std::vector<std::byte> out(e.size);
  for (int img = 1; img < images().size(); ++img) {
    const std::byte* next = all.data() + static_cast<std::size_t>(img) * bytes;
    for (std::size_t i = 0; i < n; ++i) {
      std::byte* acc = data.bytes.data() + i * e.size;
      op(acc, next + i * e.size, out.data());
      std::memcpy(acc, out.data(), e.size);
    }
  }
  data.store(a);
}

/// Strings in Fortran's collating order: by character code, `kind` bytes each.
int compare_strings(const std::byte* x, const std::byte* y, std::size_t bytes, int kind) {
  if (kind != 4) return std::memcmp(x, y, bytes);
  for (std::size_t at = 0; at + 4 <= bytes; at += 4) { // UCS-4 codes, little-endian
    std::uint32_t a, b;
    std::memcpy(&a, x + at, 4);
    std::memcpy(&b, y + at, 4);
    if (a != b) return a < b ? -1 : 1;
  }
  return 0;
}

/// integer(1) and integer(2), which Crown's built-in reductions do not take.
template <typename T>
void small_integers(const descriptor& a, int result_image, const char* what,
                    crown::caf_api::reduction op) {
  reduce_in_order(a, result_image, what,
                  [&](const std::byte* x, const std::byte* y, std::byte* out) {
                    T u, v;
                    std::memcpy(&u, x, sizeof u);
                    std::memcpy(&v, y, sizeof v);
                    const T r = op == crown::caf_api::reduction::sum   ? static_cast<T>(u + v)
                                : op == crown::caf_api::reduction::min ? std::min(u, v)
                                                                       : std::max(u, v);
                    std::memcpy(out, &r, sizeof r);
                  });
}

/// co_sum, co_min and co_max: Crown's built-in reductions; integer(1) and (2), and
/// strings (min and max: `length` characters), in image order here.
void builtin(const descriptor& a, int result_image, crown::caf_api::reduction op, int length) {
  const char* what = op == crown::caf_api::reduction::sum   ? "co_sum"
                     : op == crown::caf_api::reduction::min ? "co_min"
                                                            : "co_max";
  const element e = a.elem();
  if (e.type == bt_integer && e.size == 1)
    return small_integers<std::int8_t>(a, result_image, what, op);
  if (e.type == bt_integer && e.size == 2)
    return small_integers<std::int16_t>(a, result_image, what, op);
  if (e.type == bt_character && op != crown::caf_api::reduction::sum) {
    const int kind = length > 0 ? static_cast<int>(e.size) / length : 1;
    const bool min = op == crown::caf_api::reduction::min;
    return reduce_in_order(a, result_image, what,
                           [&](const std::byte* x, const std::byte* y, std::byte* out) {
                             const int order = compare_strings(x, y, e.size, kind);
                             std::memcpy(out, (min ? order <= 0 : order >= 0) ? x : y, e.size);
                           });
  }
  collective(a, what, [&](auto data) { // complex min/max are refused by co_builtin
    crown::caf_api::co_builtin(images(), data, op, result_image - 1, what);
  });
}

template <typename T>
void call_operation(void* fn, bool by_value, const std::byte* x, const std::byte* y,
                    std::byte* out) {
  T a, b;
  std::memcpy(&a, x, sizeof a);
  std::memcpy(&b, y, sizeof b);
  const T r = by_value ? reinterpret_cast<T (*)(T, T)>(fn)(a, b)
                       : reinterpret_cast<T (*)(const T*, const T*)>(fn)(&a, &b);
  std::memcpy(out, &r, sizeof r);
}

/// Calls CO_REDUCE's OPERATION on two elements the way gfortran compiled it: by
/// reference or by value, the result returned in registers, or through a hidden first
/// argument (character results, and derived types too large for registers).
auto user_operation(void* fn, int flags, const element& e, std::size_t char_len) {
  const bool by_value = flags & caf_arg_value;
  return [=](const std::byte* x, const std::byte* y, std::byte* out) {
    switch (e.type) {
    case bt_character:
      using chars = void (*)(std::byte*, std::size_t, const std::byte*, const std::byte*,
                             std::size_t, std::size_t);
      return reinterpret_cast<chars>(fn)(out, char_len, x, y, char_len, char_len);
    case bt_derived: // returned in memory (x86-64 System V: larger than 16 bytes)
      return reinterpret_cast<void (*)(std::byte*, const std::byte*, const std::byte*)>(fn)(out, x,
                                                                                            y);
    case bt_real:
      return e.size == 4 ? call_operation<float>(fn, by_value, x, y, out)
                         : call_operation<double>(fn, by_value, x, y, out);
    case bt_complex:
      return e.size == 8 ? call_operation<std::complex<float>>(fn, by_value, x, y, out)
                         : call_operation<std::complex<double>>(fn, by_value, x, y, out);
    default: // integer, logical
      switch (e.size) {
      case 1:
        return call_operation<std::int8_t>(fn, by_value, x, y, out);
      case 2:
        return call_operation<std::int16_t>(fn, by_value, x, y, out);
      case 4:
        return call_operation<std::int32_t>(fn, by_value, x, y, out);
      default:
        return call_operation<std::int64_t>(fn, by_value, x, y, out);
      }
    }
  };
}

/// Refuses what user_operation cannot call.
void check_operation(int flags, const element& e) {
  const auto refuse = [&](const std::string& why) {
    throw crown::argument_error("co_reduce", "an operation on " + e.text() + ": " + why);
  };
  if (flags & caf_arg_desc) refuse("array arguments are not supported");
  switch (e.type) {
  case bt_character:
    if (!(flags & caf_byref)) refuse("a character result not passed by reference");
    return;
  case bt_derived:
    if (flags & caf_arg_value) refuse("VALUE arguments of derived type are not supported");
    if (e.size <= 16)
      refuse("derived types of 16 bytes or less come back in registers whose layout the "
             "runtime cannot know; reduce their components separately");
    return;
  case bt_real:
    if (e.size != 4 && e.size != 8) refuse("only real(4) and real(8) are supported");
    return;
  case bt_complex:
    if (e.size != 8 && e.size != 16) refuse("only complex(4) and complex(8) are supported");
    return;
  case bt_integer:
  case bt_logical:
    if (e.size != 1 && e.size != 2 && e.size != 4 && e.size != 8) refuse("unsupported kind");
    return;
  default:
    refuse("unsupported type");
  }
}

} // namespace

extern "C" {

void _gfortran_caf_co_sum(descriptor* a, int result_image, int* stat, char* errmsg,
                          std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len,
          [&] { builtin(*a, result_image, crown::caf_api::reduction::sum, 0); });
}

void _gfortran_caf_co_min(descriptor* a, int result_image, int* stat, char* errmsg, int a_len,
                          std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len,
          [&] { builtin(*a, result_image, crown::caf_api::reduction::min, a_len); });
}

void _gfortran_caf_co_max(descriptor* a, int result_image, int* stat, char* errmsg, int a_len,
                          std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len,
          [&] { builtin(*a, result_image, crown::caf_api::reduction::max, a_len); });
}

void _gfortran_caf_co_reduce(descriptor* a, void* (*opr)(void*, void*), int opr_flags,
                             int result_image, int* stat, char* errmsg, int a_len,
                             std::size_t errmsg_len) {
  guarded(stat, errmsg, errmsg_len, [&] {
    const element e = a->elem();
    check_operation(opr_flags, e);
    reduce_in_order(*a, result_image, "co_reduce",
                    user_operation(reinterpret_cast<void*>(opr), opr_flags, e,
                                   static_cast<std::size_t>(a_len)));
  });
}

} // extern "C"
