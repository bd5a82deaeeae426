// lib/actor/control_core.hpp — a rank's engine in a control session. Every rank has
// one: the controller's sends commands and gathers replies; a serving rank's does the
// same for its actors' calls, and hands the commands it receives to its server
// (server.cpp), also while an endpoint waits in get() (actors are reentrant there).
// Rank 0 also sequences the commands actors relay through it, runs the watchdog and
// collects the actors' log lines.
#pragma once
#include "channel.hpp"
#include "command_queue.hpp"
#include "log_collector.hpp"
#include "protocol.hpp"
#include "recycling_map.hpp"
#include "watchdog.hpp"
#include <chrono>
#include <crown/actor/controller.hpp>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace crown::detail {

/// What a serving rank's engine hands on: commands, replies to commands it forwarded,
/// and supervision events for its actors.
class command_sink {
public:
  virtual void accept(channel::incoming& m, message_kind kind) = 0;
  /// A command with attachments (this rank's part is target `index`) arrived and went on
  /// to its children, whose answers may come before its attachments have all arrived.
  virtual void arriving(const command& c, std::size_t index) = 0;
  /// Runs the held commands whose turn has come. Called on every progress pass: a
  /// command's turn can come when the one before it starts, and if that one then waits
  /// in get() for something the held one must do first, no later message would run it.
  virtual void run_ready() = 0;
  /// A log line from an actor this rank called: on, with the reply being built.
  virtual void forward_log(std::span<const std::byte> line, int from) = 0;

protected:
  ~command_sink() = default;
};

class control_core {
public:
  control_core(MPI_Comm comm, const mailbox_map& boxes, int rank, int size, int fanout,
               double call_timeout);
  control_core(const control_core&) = delete;
  control_core& operator=(const control_core&) = delete;

  /// Rank 0: the watchdog over the serving ranks (`setting` names it in messages).
  void watch(watchdog dog, std::string setting);
  void set_sink(command_sink* sink) noexcept { sink_ = sink; }
  [[nodiscard]] class channel& channel() noexcept { return channel_; }
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }

  // Calls made from this rank.
  std::vector<std::byte>& begin_command();
  attachment_list& attachments() noexcept { return attachments_; }
  std::uint64_t submit(message_kind kind, std::uint64_t mesh_id, std::uint32_t endpoint,
                       reply_mode mode, reduce_op op, std::span<const int> ranks,
                       std::span<const std::uint32_t> positions, supervisor_ref supervisor);
  bool ready(std::uint64_t request);
  call_result take(std::uint64_t request);
  void forget(std::uint64_t request);
  stream_event next_streamed(std::uint64_t request, std::vector<std::byte>& value,
                             actor_failure& failure);
  std::size_t least_busy(std::uint64_t mesh_id, std::span<const std::uint32_t> positions);
  std::vector<actor_failure> flush();
  /// Every request still unanswered fails with `why` (the session ends under it).
  void fail_pending(const std::string& why);
  [[nodiscard]] double call_timeout() const noexcept { return call_timeout_; }
  void note_timeout(std::uint64_t request, const std::string& what);
  [[nodiscard]] bool abandoned() const;
  [[nodiscard]] std::string outstanding() const;
  std::uint64_t new_mesh_id();
  void note_mesh(std::uint64_t mesh_id, const std::string& name, const crown::mesh& on);

  // Supervision: failures nobody waited for go to the actor mesh's supervisor.
  void supervise(supervisor_ref to, std::vector<actor_failure> failures);

  // Ports.
  std::uint64_t open_port(std::uint64_t type, std::string type_name);
  void close_port(std::uint64_t id) noexcept;
  void port_send(int rank, std::uint64_t id, std::uint64_t type, std::span<const std::byte> bytes);
  /// The values of `request` go to a port as they arrive, its failures to supervision.
  void reply_via_port(std::uint64_t request, int rank, std::uint64_t id, std::uint64_t type);
  bool port_take(std::uint64_t id, std::vector<std::byte>& bytes);
  /// Sends and takes poll on every port_poll_every-th call, not on each: a poll was a
  /// third of a small message's send. A sender still learns that a receiver is gone
  /// within that many sends (or at once after anything else that polls), and a take
  /// that finds nothing waiting always polls.
  static constexpr std::uint64_t port_poll_every = 16;

  /// Polls sends and handles every message that has arrived (reentrant: an endpoint
  /// that a command runs may call it again); true when one had.
  bool progress();
  /// Sends what is left (the end of the session).
  void drain();

private:
  struct pending {
    std::uint32_t waiting = 0; ///< replies (subtrees, or targets when streamed) still due
    std::uint64_t mesh_id = 0;
    message_kind kind = message_kind::call;
    reply_mode mode = reply_mode::gather;
    std::uint32_t endpoint = 0;
    std::uint32_t targets = 0;
    int first_rank = -1;
    supervisor_ref supervisor;
    struct {
      int rank = -1; ///< -1: no response port
      std::uint64_t id = 0, type = 0;
    } port;
    std::string timed_out; ///< what a get() with a limit gave up on ("" if none did)
    bool forgotten = false;
    std::chrono::steady_clock::time_point first_failure{}; ///< while others still run
    /// The points counted in busy_: one inline (most calls have one target), the rest.
    std::uint32_t counted = 0, first_position = 0;
    std::vector<std::uint32_t> more_positions;
    call_result result;
    struct arrival {
      bool failed = false;
      std::vector<std::byte> value;
      actor_failure failure;
    };
    std::vector<arrival> streamed; ///< stream mode: in arrival order (no allocation unless
    std::size_t taken = 0;         ///< streamed), of which the first `taken` were taken
  };
  using pending_map = recycling_map<std::uint64_t, pending>;
  struct port_state {
    std::uint64_t type = 0;
    std::string type_name;
    struct message {
      std::vector<std::byte> bytes;
      int from = -1;
      bool wrong_type = false;
    };
    std::deque<message> ready;
    in_order_queue<message> early; ///< each sender's messages in its order
  };

  void accept_reply(const std::optional<reply_view>& reply, int source);
  /// A command with attachments: forwarded down its tree at once (pieces too, as they
  /// arrive), handled once they are all here (relayed by rank 0 then, else run).
  void begin_arrival(channel::incoming& m, message_kind kind);
  void finish_arrivals();
  void dispatch_command(channel::incoming& m, message_kind kind);
  /// Sends `message` (a copy of command `c` from `source`) to `children` on a tag of
  /// this rank's, and receives its attachments, sending each piece on to them.
  std::shared_ptr<bulk_in> receive_bulk(const command& c, int source, message_buffer message,
                                        std::vector<int> children);
  void collect_log(std::span<const std::byte> bytes, int from);
  void relay(const channel::incoming& m);
  /// Rank 0 gives a relayed command its place in its own stream (in `message`).
  void sequence(const command& c, std::vector<std::byte>& message);
  void accept_note(const channel::incoming& m, message_kind kind);
  void deliver(int from, const note& n);
  /// Sends a port message without driving progress (safe inside message handling).
  void post_port_message(int rank, std::uint64_t id, std::uint64_t type,
                         std::span<const std::byte> bytes);
  void to_reply_port(pending& p, std::span<const std::byte> value);
  void check_watchdog();
  void check_partial_failures();
  void retire(pending_map::iterator it);
  void settle(const pending& p);
  static actor_failure failure_of(std::span<const std::byte> bytes, int from);
  std::string describe(std::uint64_t mesh_id) const;

  class channel channel_;
  int rank_, size_, fanout_;
  double call_timeout_; ///< seconds, scaled; 0 = none
  command_sink* sink_ = nullptr;
  std::uint64_t seq_ = 0, next_request_ = 0, ticks_ = 0, next_port_ = 0, port_calls_ = 0;
  std::size_t last_bytes_ = 0; ///< of the last command
  std::uint32_t next_mesh_ = 0;
  std::size_t unfinished_ = 0; ///< requests still waiting for replies
  std::vector<std::uint64_t> sent_to_, order_, origin_order_, bulk_sizes_;
  message_buffer next_;         ///< the command being written (begin_command)
  attachment_list attachments_; ///< its large arguments, in the caller's memory
  struct arrival {
    channel::incoming message;
    message_kind kind;
    std::shared_ptr<bulk_in> bulk;
    bool relayed; ///< rank 0 relayed it: nothing left to do once it is here
  };
  std::deque<arrival> arrivals_;
  pending_map requests_;
  std::vector<std::uint64_t> failing_;                       ///< incomplete requests with failures
  std::unordered_map<std::uint64_t, std::vector<int>> busy_; ///< calls in flight by mesh, point
  std::vector<actor_failure> supervision_;                   ///< rank 0: for flush()
  watchdog watchdog_{nullptr, 0, 0};
  std::string watchdog_setting_;
  std::map<int, std::vector<std::string>> hosted_;
  std::map<std::uint64_t, std::string> mesh_names_;
  log_collector logs_;
  std::unordered_map<std::uint64_t, port_state> ports_;
  std::map<std::pair<int, std::uint64_t>, std::uint64_t> port_sent_; ///< next seq per port
  std::set<std::pair<int, std::uint64_t>> closed_ports_;             ///< known gone
  std::vector<std::byte> port_out_; ///< a port message being written (kept for the next)
};

} // namespace crown::detail
