// include/crown/actor/port.hpp — channels between any ranks of a control session: a
// port sends, its receiver receives (one-way, FIFO per sender, like Monarch's ports).
#pragma once
#include <chrono>
#include <crown/actor/future.hpp>
#include <crown/actor/registry.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace crown {
namespace detail {

/// Names T on the wire (a hash of its type name: the job runs one binary).
template <typename T>
std::uint64_t port_type_tag() {
  std::uint64_t h = 14695981039346656037ull; // FNV-1a
  for (const char* c = typeid(T).name(); *c; ++c)
    h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return h;
}

/// This rank's engine in the running control session; throws state_error outside one.
control_core& running_core(const char* what);
/// A new port on this rank for values tagged `type` (`type_name` for errors).
std::uint64_t open_port(control_core& core, std::uint64_t type, std::string type_name);
void close_port(control_core& core, std::uint64_t id) noexcept;
/// A buffer to serialise a value to send into, empty: this thread's spare, taken out of
/// its place (a send made inside another's progress gets one of its own), and given
/// back after the send, so a stream of small messages allocates nothing for it.
std::vector<std::byte> take_send_buffer() noexcept;
void give_back_send_buffer(std::vector<std::byte>&& bytes) noexcept;
/// Sends the serialised value `bytes` to port `id` on `rank` (state_error once the
/// port's receiver is known to be gone).
void port_send(control_core& core, int rank, std::uint64_t id, std::uint64_t type,
               std::span<const std::byte> bytes);
/// Takes the port's next message, if any, into `bytes`, driving progress first when none
/// is waiting and on every 16th take (throws argument_error for one of another type,
/// naming its sender's rank).
bool port_take(control_core& core, std::uint64_t id, std::vector<std::byte>& bytes);
/// The rank whose receiver port `id` belongs to (ids carry it).
int port_rank(std::uint64_t id) noexcept;
/// The values of `request` go to the port as they arrive (an adverb's response port).
void reply_via_port(control_core& core, std::uint64_t request, int rank, std::uint64_t id,
                    std::uint64_t type);

} // namespace detail

/// The sending end of a channel: cheap to copy, serialisable (it travels in messages and
/// as endpoint arguments), and usable from any rank of the control session.
template <typename T>
class port {
public:
  port() = default; ///< an unbound port, e.g. to receive one as an argument
  port(int rank, std::uint64_t id) : rank_(rank), id_(id) {}
  /// Sends `value` to the receiver; messages from one rank arrive in the order sent.
  /// Throws state_error once the receiver is known to be gone.
  void send(const T& value) const {
    if (id_ == 0) throw state_error("crown::port::send", "an unbound port (default-constructed)");
    std::vector<std::byte> bytes = detail::take_send_buffer();
    detail::to_bytes(value, bytes);
    detail::port_send(detail::running_core("crown::port::send"), rank_, id_,
                      detail::port_type_tag<T>(), bytes);
    detail::give_back_send_buffer(std::move(bytes));
  }
  [[nodiscard]] int rank() const noexcept { return rank_; } ///< where the receiver lives
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }

  template <class Ar>
  void serialize(Ar& ar) {
    ar(rank_, id_);
  }

private:
  int rank_ = -1;
  std::uint64_t id_ = 0;
};

/// The receiving end of a channel: lives on the rank that opened it; move-only. Once it
/// is destroyed, messages to its port are dropped and their senders' next send() throws.
template <typename T>
class receiver {
public:
  receiver(detail::control_core* core, std::uint64_t id)
      : core_(core), id_(id), session_(detail::control_session()) {}
  receiver(receiver&& o) noexcept
      : core_(std::exchange(o.core_, nullptr)), id_(o.id_), session_(o.session_) {}
  receiver& operator=(receiver&&) = delete;
  receiver(const receiver&) = delete;
  ~receiver() {
    if (core_ && session_ == detail::control_session()) detail::close_port(*core_, id_);
  }

  /// The next message, if one has arrived (drives progress when none is waiting).
  std::optional<T> try_recv() {
    std::vector<std::byte> bytes;
    if (!detail::port_take(live(), id_, bytes)) return std::nullopt;
    return detail::from_bytes<T>(bytes);
  }
  /// Waits for the next message (for at most CROWN_CALL_TIMEOUT, when set).
  T recv() {
    if (const double limit = detail::call_timeout(live()); limit > 0)
      return recv(std::chrono::duration<double>(limit));
    auto pause = detail::backoff::unwatched(); // serves this rank's actors meanwhile
    for (;; pause.pause())
      if (auto v = try_recv()) return std::move(*v);
  }
  /// Waits for at most `timeout`; then throws timeout_error.
  template <typename Rep, typename Period>
  T recv(std::chrono::duration<Rep, Period> timeout) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
    auto pause = detail::backoff::unwatched();
    for (;; pause.pause()) {
      if (auto v = try_recv()) return std::move(*v);
      if (std::chrono::steady_clock::now() >= until)
        throw timeout_error("crown::receiver::recv",
                            "no message within " +
                                std::to_string(std::chrono::duration<double>(timeout).count()) +
                                " s");
    }
  }

private:
  detail::control_core& live() const {
    if (!core_ || session_ != detail::control_session())
      throw state_error("crown::receiver", "its control session has ended (or it was moved)");
    return *core_;
  }
  detail::control_core* core_;
  std::uint64_t id_;
  std::uint64_t session_;
};

/// An adverb's response port: `mesh.call(crown::reply_to{port}, &A::f, ...)` sends each
/// actor's value to `port` as it finishes, instead of returning a future.
template <typename T>
struct reply_to {
  port<T> to;
};
template <typename T>
reply_to(port<T>) -> reply_to<T>;

/// A new channel whose receiver lives on the calling rank (the controller or an actor's).
template <typename T>
std::pair<port<T>, receiver<T>> open_channel() {
  detail::control_core& core = detail::running_core("crown::open_channel");
  const std::uint64_t id =
      detail::open_port(core, detail::port_type_tag<T>(), detail::demangle(typeid(T).name()));
  return {port<T>(detail::port_rank(id), id), receiver<T>(&core, id)};
}

} // namespace crown
