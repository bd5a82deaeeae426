// CPU atomics on heap words, and the arithmetic of read-modify-writes that backends
// build from compare-and-swap.
#include "atomic_bits.hpp"
#include "transfer.hpp"
#include <atomic>
#include <type_traits>

namespace crown::detail {
namespace {

/// The new value of a read-modify-write, computed on the old one.
template <typename T>
T apply(atomic_op op, T old, T operand) {
  switch (op) {
  case atomic_op::add:
    return static_cast<T>(old + operand);
  case atomic_op::store:
  case atomic_op::swap:
    return operand;
  default:
    break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
    case atomic_op::bit_and:
      return old & operand;
    case atomic_op::bit_or:
      return old | operand;
    case atomic_op::bit_xor:
      return old ^ operand;
    default:
      break;
    }
  }
  throw argument_error("atomic", "operation not defined on this type");
}

template <typename T>
std::uint64_t cpu_atomic(std::byte* where, atomic_op op, std::uint64_t operand_bits,
                         std::uint64_t compare_bits) {
  std::atomic_ref<T> word(*reinterpret_cast<T*>(where));
  const T operand = from_bits<T>(operand_bits);
  switch (op) {
  case atomic_op::load:
    return bits_of(word.load());
  case atomic_op::store:
    word.store(operand);
    return 0;
  case atomic_op::swap:
    return bits_of(word.exchange(operand));
  case atomic_op::compare_swap: {
    T expected = from_bits<T>(compare_bits);
    word.compare_exchange_strong(expected, operand);
    return bits_of(expected);
  }
  case atomic_op::add:
    return bits_of(word.fetch_add(operand));
  default:
    break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
    case atomic_op::bit_and:
      return bits_of(word.fetch_and(operand));
    case atomic_op::bit_or:
      return bits_of(word.fetch_or(operand));
    case atomic_op::bit_xor:
      return bits_of(word.fetch_xor(operand));
    default:
      break;
    }
  }
  throw argument_error("atomic", "operation not defined on this type");
}

} // namespace

std::uint64_t atomic_result_bits(atomic_op op, int width, bool floating, std::uint64_t old,
                                 std::uint64_t operand) {
  const auto next = [&](auto tag) {
    using T = decltype(tag);
    return bits_of(apply(op, from_bits<T>(old), from_bits<T>(operand)));
  };
  if (floating) return width == 4 ? next(float{}) : next(double{});
  return width == 4 ? next(std::int32_t{}) : next(std::int64_t{});
}

std::uint64_t cpu_atomic_any(std::byte* where, atomic_op op, int width, bool floating,
                             std::uint64_t operand, std::uint64_t compare) {
  if (floating)
    return width == 4 ? cpu_atomic<float>(where, op, operand, compare)
                      : cpu_atomic<double>(where, op, operand, compare);
  return width == 4 ? cpu_atomic<std::int32_t>(where, op, operand, compare)
                    : cpu_atomic<std::int64_t>(where, op, operand, compare);
}

} // namespace crown::detail
