// include/crown/parallel/memory.hpp — the accounting allocator training buffers come from:
// every byte of parameters, gradients, optimizer state, activations and FSDP's gathered
// units is charged to its kind, so the bytes held and their peaks are measured, not computed.
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace crown::parallel {

/// What a training buffer holds. `gathered`: FSDP's unsharded parameters and gradients of
/// the units in flight (reported apart from the sharded model state).
enum class buffer_kind : std::size_t { params, grads, optimizer, activations, gathered };
inline constexpr std::size_t buffer_kinds = 5;
[[nodiscard]] std::string_view to_string(buffer_kind k) noexcept;

/// This process's training bytes: held now and the peak of each kind, and the peak of
/// their sum (not the sum of the peaks: kinds peak at different moments).
struct memory_ledger {
  std::array<std::size_t, buffer_kinds> current{}, peak{};
  std::size_t peak_total = 0;
  [[nodiscard]] std::size_t now(buffer_kind k) const noexcept { return current[std::size_t(k)]; }
  [[nodiscard]] std::size_t max(buffer_kind k) const noexcept { return peak[std::size_t(k)]; }
  /// Parameters, gradients and optimizer state: the model state FSDP shards.
  [[nodiscard]] std::size_t peak_model_state() const noexcept {
    return max(buffer_kind::params) + max(buffer_kind::grads) + max(buffer_kind::optimizer);
  }
};

/// The ledger of this process (thread-safe: buffers are charged from any thread).
[[nodiscard]] memory_ledger memory_now() noexcept;
/// Restarts every peak at what is held now (before a measurement).
void reset_memory_peaks() noexcept;

} // namespace crown::parallel

namespace crown::detail {
void charge(parallel::buffer_kind k, std::size_t bytes) noexcept;
void discharge(parallel::buffer_kind k, std::size_t bytes) noexcept;
} // namespace crown::detail

namespace crown::parallel {

/// A std::allocator that charges what it hands out to a kind. Stateful: containers of
/// different kinds have one type (tracked_vector<T>) and never share storage.
template <typename T>
class accounting_allocator {
public:
  using value_type = T;
  explicit accounting_allocator(buffer_kind k) noexcept : kind_(k) {}
  template <typename U>
  accounting_allocator(const accounting_allocator<U>& o) noexcept : kind_(o.kind()) {}
  T* allocate(std::size_t n) {
    T* p = std::allocator<T>{}.allocate(n);
    detail::charge(kind_, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept {
    detail::discharge(kind_, n * sizeof(T));
    std::allocator<T>{}.deallocate(p, n);
  }
  [[nodiscard]] buffer_kind kind() const noexcept { return kind_; }
  template <typename U>
  bool operator==(const accounting_allocator<U>& o) const noexcept {
    return kind_ == o.kind();
  }

private:
  buffer_kind kind_;
};

template <typename T>
using tracked_vector = std::vector<T, accounting_allocator<T>>;

/// `n` value-initialised elements charged to `k`.
template <typename T>
[[nodiscard]] tracked_vector<T> tracked(buffer_kind k, std::size_t n = 0) {
  return tracked_vector<T>(n, T{}, accounting_allocator<T>(k));
}

/// Charges memory that does not come from the allocator (the symmetric heap's blocks)
/// for as long as it lives.
class tracked_bytes {
public:
  tracked_bytes() noexcept = default;
  tracked_bytes(buffer_kind k, std::size_t bytes) noexcept : kind_(k), bytes_(bytes) {
    detail::charge(k, bytes);
  }
  tracked_bytes(tracked_bytes&& o) noexcept : kind_(o.kind_), bytes_(std::exchange(o.bytes_, 0)) {}
  tracked_bytes& operator=(tracked_bytes&& o) noexcept {
    std::swap(kind_, o.kind_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~tracked_bytes() {
    if (bytes_) detail::discharge(kind_, bytes_);
  }

private:
  buffer_kind kind_ = buffer_kind::params;
  std::size_t bytes_ = 0;
};

} // namespace crown::parallel
