// include/crown/global_ptr.hpp — a pointer into one rank's heap, passable between ranks.
#pragma once
#include <bit>
#include <crown/detail/checked.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/types.hpp>
#include <crown/runtime.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace crown {

/// (rank, offset) into the symmetric heap: meaningful on every rank of the job, so it
/// can be sent in messages (it is serialisable with cereal) and used from anywhere.
/// Transfers are blocking, as for coarrays. Atomics use CPU atomics only when the
/// whole world shares memory; otherwise always the transport, also on the owner.
template <typename T>
class global_ptr {
  static_assert(std::is_trivially_copyable_v<T>);

public:
  global_ptr() = default;
  global_ptr(int rank, std::uint64_t offset) noexcept : rank_(rank), offset_(offset) {}

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  [[nodiscard]] bool is_null() const noexcept { return rank_ < 0; }
  explicit operator bool() const noexcept { return rank_ >= 0; }
  /// A plain pointer when the memory is reachable by load/store from here, else nullptr.
  [[nodiscard]] T* local() const noexcept {
    return reinterpret_cast<T*>(detail::heap_peer_address(rank_, offset_));
  }

  [[nodiscard]] global_ptr operator+(std::ptrdiff_t n) const noexcept {
    return {rank_, offset_ + static_cast<std::uint64_t>(n) * sizeof(T)};
  }
  friend bool operator==(const global_ptr&, const global_ptr&) = default;

  void put(std::span<const T> src) const {
    detail::remote_put(rank_, offset_, src.data(), src.size_bytes());
  }
  void get(std::span<T> dst) const {
    detail::remote_get(rank_, offset_, dst.data(), dst.size_bytes());
  }
  void put(const T& value) const { detail::remote_put(rank_, offset_, &value, sizeof(T)); }
  [[nodiscard]] T get() const {
    T value;
    detail::remote_get(rank_, offset_, &value, sizeof(T));
    return value;
  }
  T fetch_add(T v) const requires detail::atomic_capable<T> {
    using bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    return std::bit_cast<T>(static_cast<bits_t>(detail::remote_atomic(
        rank_, offset_, detail::atomic_op::add, sizeof(T), std::is_floating_point_v<T>,
        std::bit_cast<bits_t>(v), 0, detail::world_shares_memory())));
  }

  template <typename Archive>
  void serialize(Archive& ar) {
    ar(rank_, offset_);
  }

private:
  int rank_ = -1;
  std::uint64_t offset_ = 0;
};

/// `n` elements in the calling rank's heap (not collective). Zeroed. Throws
/// resource_error when they do not fit (also when n x sizeof(T) exceeds 2^64).
template <typename T>
global_ptr<T> allocate(std::size_t n = 1) {
  const std::uint64_t offset =
      detail::heap_allocate_local(detail::saturating_mul(n, sizeof(T)), "crown::allocate");
  std::byte* p = detail::heap_address(offset);
  std::fill(p, p + n * sizeof(T), std::byte{0});
  return {this_runtime().rank(), offset};
}

/// Frees memory from allocate(); only its owner may, and only once.
template <typename T>
void deallocate(global_ptr<T> p) {
  if (p.rank() != this_runtime().rank())
    throw argument_error("crown::deallocate(global_ptr of rank " + std::to_string(p.rank()) + ")",
                         "only the owning rank can free it");
  detail::heap_release_local(p.offset());
}

} // namespace crown
