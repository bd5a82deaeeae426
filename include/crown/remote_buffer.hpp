// include/crown/remote_buffer.hpp — ordinary memory of one rank that other ranks read
// and write one-sidedly (PyTorch Monarch's RDMABuffer).
#pragma once
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <crown/detail/buffer.hpp>
#include <crown/detail/checked.hpp>
#include <crown/error.hpp>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace crown {

namespace detail {
/// `count` elements at element `at` of a buffer, from or into `local`; an offset whose
/// bytes exceed 2^64 saturates, so the range check refuses it.
template <typename T>
buffer_piece piece_of(bool write, std::size_t at, const T* local, std::size_t count) noexcept {
  return {write, saturating_mul(at, sizeof(T)),
          const_cast<std::byte*>(reinterpret_cast<const std::byte*>(local)), count * sizeof(T)};
}
} // namespace detail

/// A handle on `T` elements of one rank's own memory (a std::vector's, a tensor's,
/// any span), not of Crown's heap, that any rank can read into and write from. The
/// owner makes it from a span; the handle is serialisable, so it travels as an actor
/// argument, in a port message or through MPI. The memory must outlive the
/// registration, which ends when the owner's last copy of the handle goes, or at
/// drop(); afterwards every access, from any rank, throws state_error naming the
/// buffer and its owner (an access in progress finishes first). An access outside the
/// buffer throws argument_error. Accesses are blocking and each is atomic with respect
/// to the owner's drop, not to other accesses.
///
/// The owner's host reaches it with one kernel copy (process_vm_readv/writev) where the
/// ptrace rules and CROWN_SINGLE_COPY allow, large transfers through staging slots in
/// the reader's heap that the owner fills and empties on request (kernel copies take
/// over from an owner that does not serve within 10 ms); other hosts through UCX with
/// the memory registered (ucp_mem_map) when the transport is UCX; otherwise by requests
/// that the owner serves whenever Crown progresses there (the progress thread, any
/// Crown call).
template <typename T>
class remote_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "remote_buffer<T> needs a trivially "
                                                 "copyable T: its bytes travel as they are");

public:
  remote_buffer() = default;
  /// Registers `memory` (not collective). `label` names it in errors.
  explicit remote_buffer(std::span<T> memory, std::string label = {})
      : owner_(std::make_shared<registration>(detail::buffer_register(
            memory.data(), memory.size_bytes(), sizeof(T), std::move(label)))),
        d_(owner_->d) {}

  [[nodiscard]] std::size_t size() const noexcept { return d_.bytes / sizeof(T); }
  [[nodiscard]] std::size_t size_bytes() const noexcept { return d_.bytes; }
  [[nodiscard]] int rank() const noexcept { return d_.rank; } ///< the owner's world rank
  [[nodiscard]] const std::string& label() const noexcept { return d_.label; }
  [[nodiscard]] bool valid() const noexcept { return d_.rank >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  /// True for the owner's copies: they keep the registration alive.
  [[nodiscard]] bool owns() const noexcept { return owner_ != nullptr; }
  /// How this rank reaches the memory: "local", "process_vm" (large transfers through
  /// staging slots), "staged" (slots only: CROWN_SINGLE_COPY=0), "ucx" or "am".
  [[nodiscard]] const char* path() const { return detail::buffer_path(d_); }

  /// Copies dst.size() elements from element `at` on into `dst`.
  void read_into(std::span<T> dst, std::size_t at = 0) const {
    const auto p = detail::piece_of(false, at, dst.data(), dst.size());
    detail::buffer_transfer(d_, {&p, 1});
  }
  /// Copies `src` into the buffer from element `at` on.
  void write_from(std::span<const T> src, std::size_t at = 0) const {
    const auto p = detail::piece_of(true, at, src.data(), src.size());
    detail::buffer_transfer(d_, {&p, 1});
  }
  /// The owner ends the registration now (also for its other copies); waits for
  /// accesses in progress. A no-op for a handle that does not own.
  void drop() noexcept {
    if (owner_) owner_->release();
    owner_.reset();
  }

  template <typename Archive>
  void save(Archive& ar) const {
    ar(d_);
  }
  template <typename Archive>
  void load(Archive& ar) {
    owner_.reset();
    ar(d_);
    if (d_.elem != sizeof(T))
      throw argument_error("remote_buffer '" + d_.label + "' of rank " + std::to_string(d_.rank),
                           "made with elements of " + std::to_string(d_.elem) +
                               " bytes, received as remote_buffer<T> with sizeof(T) " +
                               std::to_string(sizeof(T)));
  }

  /// For crown::buffer_batch.
  [[nodiscard]] const detail::buffer_descriptor& descriptor() const noexcept { return d_; }

private:
  struct registration {
    explicit registration(detail::buffer_descriptor desc) : d(std::move(desc)) {}
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;
    ~registration() { release(); }
    void release() noexcept {
      if (live) detail::buffer_unregister(d);
      live = false;
    }
    detail::buffer_descriptor d;
    bool live = true;
  };
  std::shared_ptr<registration> owner_;
  detail::buffer_descriptor d_;
};

/// Several reads and writes, on one buffer or many, run in the order added by run():
/// each buffer's consecutive operations go out together (one check of its liveness,
/// requests in flight at once), like Monarch's batched RDMA actions. The buffers and
/// the local memory must stay until run() returns.
class buffer_batch {
public:
  template <typename T>
  buffer_batch& read_into(const remote_buffer<T>& b, std::span<T> dst, std::size_t at = 0) {
    ops_.push_back({&b.descriptor(), detail::piece_of(false, at, dst.data(), dst.size())});
    return *this;
  }
  template <typename T>
  buffer_batch& write_from(const remote_buffer<T>& b, std::span<const T> src, std::size_t at = 0) {
    ops_.push_back({&b.descriptor(), detail::piece_of(true, at, src.data(), src.size())});
    return *this;
  }
  [[nodiscard]] std::size_t size() const noexcept { return ops_.size(); }
  /// Runs every operation, then forgets them (also when one throws).
  void run() {
    std::vector<op> todo;
    todo.swap(ops_);
    std::vector<detail::buffer_piece> group;
    for (std::size_t i = 0; i < todo.size();) {
      const detail::buffer_descriptor& d = *todo[i].buffer;
      group.clear();
      for (; i < todo.size() && todo[i].buffer->rank == d.rank && todo[i].buffer->id == d.id; ++i)
        group.push_back(todo[i].piece);
      detail::buffer_transfer(d, group);
    }
  }

private:
  struct op {
    const detail::buffer_descriptor* buffer;
    detail::buffer_piece piece;
  };
  std::vector<op> ops_;
};

} // namespace crown
