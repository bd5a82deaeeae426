// include/crown/actor/future.hpp — the result of a call that is still on its way.
#pragma once
#include <chrono>
#include <crown/actor/registry.hpp>
#include <crown/actor/wire.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace crown {
namespace detail {

/// What came back for one command: values by point index, and failures.
struct call_result {
  std::vector<std::pair<std::uint32_t, std::vector<std::byte>>> values;
  std::vector<actor_failure> failures;
};

/// A rank's engine in a control session (lib/actor): commands out, replies in, and on a
/// serving rank the commands it serves, also while one of its endpoints waits in get().
/// Not thread-safe: the controller and each serving rank drive it from one thread.
class control_core;
bool request_ready(control_core& core, std::uint64_t request); ///< drives progress once
call_result take_result(control_core& core, std::uint64_t request);
/// The result is not wanted: failures go to the controller's supervision.
void forget_request(control_core& core, std::uint64_t request);
/// What a stream has next: nothing yet, a value, a failure, or the end.
enum class stream_event { none, value, failure, end };
/// Drives progress once and takes the next arrival of a stream's request into `value`
/// or `failure`; after `end` the request is gone.
stream_event next_streamed(control_core& core, std::uint64_t request, std::vector<std::byte>& value,
                           actor_failure& failure);
/// CROWN_CALL_TIMEOUT x CROWN_TIMEOUT_SCALE in seconds, 0 when get() may wait for ever.
double call_timeout(const control_core& core) noexcept;
/// A get() with a limit gave up on `request` (`what` names the call): leaving control
/// then waits for the actors only for the watchdog's time, and names it if it is late.
void note_timeout(control_core& core, std::uint64_t request, const std::string& what);
/// The running control session's number (0 outside runtime::control): futures and
/// actor-mesh handles check it, so one kept past its session fails cleanly.
std::uint64_t control_session() noexcept;

/// An actor mesh as the controller addresses it (controller.hpp); shared by a handle,
/// its copies and the futures of its calls.
struct actor_mesh_ref;
/// What a future answers for: enough to name it in an error, built into a string only
/// when one is thrown (a call costs no string work).
struct call_site {
  const char* adverb = "";
  std::shared_ptr<const actor_mesh_ref> target;
  reduce_op op = reduce_op::sum;
  [[nodiscard]] std::string what() const; ///< "call_one on actor mesh trainers mesh{...}"
};

} // namespace detail

/// A value that a call will produce. get() drives the controller's progress itself
/// (no other thread is involved), so many calls may be in flight at once; a future
/// that is dropped unwaited is still completed, and its failures reach supervision.
template <typename T>
class future {
public:
  /// Turns the replies into the value (or throws what they report).
  using finish_fn = T (*)(detail::call_result&&, const detail::call_site&);
  future(detail::control_core* core, std::uint64_t request, detail::call_site site,
         finish_fn finish)
      : core_(core), request_(request), session_(detail::control_session()), site_(std::move(site)),
        finish_(finish) {}
  future(future&& o) noexcept
      : core_(std::exchange(o.core_, nullptr)), request_(o.request_), session_(o.session_),
        site_(std::move(o.site_)), finish_(o.finish_) {}
  future& operator=(future&& o) noexcept {
    if (this != &o) {
      drop();
      core_ = std::exchange(o.core_, nullptr);
      request_ = o.request_;
      session_ = o.session_;
      site_ = std::move(o.site_);
      finish_ = o.finish_;
    }
    return *this;
  }
  future(const future&) = delete;
  future& operator=(const future&) = delete;
  ~future() { drop(); }

  /// True once every target has answered; never blocks.
  [[nodiscard]] bool ready() {
    if (!core_)
      throw state_error(site_.what(), "this future's result was already taken (or moved)");
    if (session_ != detail::control_session())
      throw state_error(site_.what(), "its control session has ended (futures live only "
                                      "inside runtime::control)");
    return detail::request_ready(*core_, request_);
  }
  /// Waits for every answer (for at most CROWN_CALL_TIMEOUT, when set: then as
  /// get(timeout)). Throws actor_error listing every failed point.
  T get() {
    if (const double limit = core_ ? detail::call_timeout(*core_) : 0; limit > 0)
      return get_within(std::chrono::duration<double>(limit), " (CROWN_CALL_TIMEOUT)");
    auto pause = detail::backoff::unwatched(); // spins, then yields: a worker may need this core
    while (!ready()) pause.pause();
    return finish_(detail::take_result(*std::exchange(core_, nullptr), request_), site_);
  }
  /// As get(), but throws timeout_error when `timeout` passes first (the call stays in
  /// flight; get() may be called again).
  template <typename Rep, typename Period>
  T get(std::chrono::duration<Rep, Period> timeout) {
    return get_within(std::chrono::duration<double>(timeout), "");
  }

private:
  T get_within(std::chrono::duration<double> timeout, const char* setting) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
    auto pause = detail::backoff::unwatched();
    for (; !ready(); pause.pause())
      if (std::chrono::steady_clock::now() >= until) {
        detail::note_timeout(*core_, request_, site_.what());
        throw timeout_error(site_.what(), "no complete answer within " +
                                              std::to_string(timeout.count()) + " s" + setting);
      }
    return finish_(detail::take_result(*std::exchange(core_, nullptr), request_), site_);
  }
  /// An unwanted result: the call still completes, and its failures go to supervision.
  void drop() noexcept {
    if (!core_ || session_ != detail::control_session()) return; // the core is gone
    try {
      detail::forget_request(*core_, request_);
    } catch (...) { // a destructor must not throw; the controller logs MPI failures
    }
    core_ = nullptr;
  }

  detail::control_core* core_;
  std::uint64_t request_;
  std::uint64_t session_;
  detail::call_site site_;
  finish_fn finish_;
};

/// The values of actor_mesh::stream, in the order the actors finished: a single-pass
/// range (for (auto& v : mesh.stream(...))), or next(). A failed actor's turn throws
/// actor_error naming it; the stream goes on after it. Dropped early, the remaining
/// answers are still collected and their failures go to supervision.
template <typename T>
class value_stream {
public:
  value_stream(detail::control_core* core, std::uint64_t request, detail::call_site site)
      : core_(core), request_(request), session_(detail::control_session()),
        site_(std::move(site)) {}
  value_stream(value_stream&& o) noexcept
      : core_(std::exchange(o.core_, nullptr)), request_(o.request_), session_(o.session_),
        site_(std::move(o.site_)), current_(std::move(o.current_)) {}
  value_stream& operator=(value_stream&&) = delete;
  ~value_stream() {
    if (core_ && session_ == detail::control_session()) {
      try {
        detail::forget_request(*core_, request_);
      } catch (...) { // a destructor must not throw
      }
    }
  }

  /// The next value, waiting for it; nullopt once every actor has answered.
  std::optional<T> next() {
    if (!core_) return std::nullopt;
    if (session_ != detail::control_session())
      throw state_error(site_.what(), "its control session has ended");
    std::vector<std::byte> bytes;
    actor_failure failed;
    auto pause = detail::backoff::unwatched();
    for (;; pause.pause()) {
      switch (detail::next_streamed(*core_, request_, bytes, failed)) {
      case detail::stream_event::value:
        return detail::from_bytes<T>(bytes);
      case detail::stream_event::failure:
        throw actor_error(site_.what(), {std::move(failed)});
      case detail::stream_event::end:
        core_ = nullptr;
        return std::nullopt;
      case detail::stream_event::none:
        break;
      }
    }
  }

  struct sentinel {};
  class iterator {
  public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    explicit iterator(value_stream* s) : s_(s) { ++*this; }
    T& operator*() const { return *s_->current_; }
    iterator& operator++() {
      s_->current_ = s_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(sentinel) const { return !s_->current_; }

  private:
    value_stream* s_;
  };
  iterator begin() { return iterator(this); }
  sentinel end() { return {}; }

private:
  detail::control_core* core_;
  std::uint64_t request_;
  std::uint64_t session_;
  detail::call_site site_;
  std::optional<T> current_;
};

template <typename F>
concept awaitable = requires(F& f) {
  f.ready();
};

/// Waits for all of them (results stay in the futures for get()).
template <awaitable... F>
void wait_all(F&... futures) {
  auto pause = detail::backoff::unwatched(); // bounded by the watchdog
  while (!(futures.ready() && ...)) pause.pause();
}

} // namespace crown
