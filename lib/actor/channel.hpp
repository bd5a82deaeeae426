// lib/actor/channel.hpp — how controller messages travel between ranks: receives are
// posted ahead into a ring of fixed slots (an arriving message is matched at once, with
// no probe, and copied out into a pooled buffer so that its slot is posted again at
// once), sends reuse pooled buffers, and a message larger than a slot goes as a notice
// followed by its body.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mpi.h>
#include <span>
#include <vector>

namespace crown::detail {

using message_buffer = std::shared_ptr<std::vector<std::byte>>;

class channel {
public:
  static constexpr std::size_t slot_bytes = 16 << 10;
  static constexpr std::size_t slots = 8;

  explicit channel(MPI_Comm comm);
  ~channel(); ///< cancels the posted receives
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  /// An empty buffer for an outgoing message (reused once MPI is done with it), one
  /// with room for `bytes` when a spare one has it.
  message_buffer acquire(std::size_t bytes = 0);
  /// Gives a buffer back for reuse (kept when nothing else holds it and the pool has
  /// room: up to 64 small ones, 1024 of at most 1 KiB, and 2 large ones, so a large
  /// payload sent or received again needs no new pages).
  void recycle(message_buffer b);
  /// Sends `data` to `dest` without copying; the buffer may go to several ranks.
  void send(const message_buffer& data, int dest);
  /// Retires completed sends (one MPI call when any are pending, none otherwise). Only
  /// the oldest `send_window` are tested: sends complete roughly in order, and the cost
  /// of a poll must not grow with the number of messages in flight.
  void poll_sends();
  static constexpr std::size_t send_window = 64;
  /// Sends handed to MPI at once; more wait in this channel's queue (MPI's own queues
  /// are searched linearly, so tens of thousands in flight there cost quadratic time).
  static constexpr std::size_t sends_in_mpi = 256;
  /// Waits for every send.
  void drain_sends();

  struct incoming {
    std::span<const std::byte> bytes; ///< the message, in `owned`
    int source = -1;
    message_buffer owned; ///< its buffer (recycle() it when done)
  };
  /// The next message that has arrived, if any.
  bool receive(incoming& m);

private:
  struct slot {
    std::vector<std::byte> bytes = std::vector<std::byte>(slot_bytes);
    MPI_Request request = MPI_REQUEST_NULL;
    bool arrived = false; ///< completed (status below), not yet handed out
    MPI_Status status{};
  };
  /// Marks every slot whose message has arrived, with one MPI call; true if the head's has.
  bool test_slots();
  struct large_receive {
    message_buffer body;
    int source;
    MPI_Request request;
    bool discard = false; ///< a body unlike its notice: received (MPI must), then dropped
  };
  /// A body announced by a notice but not yet matched: nothing is allocated for it
  /// until it arrives (MPI_Improbe), and then by its true size.
  struct announced {
    int source;
    std::uint64_t bytes;
  };
  void post(slot& s);
  void match_announced(); ///< turns arrived bodies into receives (or drops false ones)

  MPI_Comm comm_;
  std::array<slot, slots> ring_;
  std::size_t head_ = 0;
  bool sweep_ = false; ///< the last receive found a message: test every slot next
  std::vector<large_receive> large_;
  std::vector<announced> announced_; ///< in arrival order (one sender's bodies stay in order)
  struct pending_send {
    MPI_Request request;
    message_buffer buffer;
  };
  std::deque<pending_send> sends_; ///< oldest first; done ones wait for those before them
  struct queued_send {
    message_buffer buffer;
    int dest, tag;
  };
  std::deque<queued_send> queued_; ///< not yet handed to MPI, in order
  void start_send(message_buffer b, int dest, int tag);
  std::vector<MPI_Request> window_;
  std::vector<int> done_;
  std::vector<message_buffer> free_small_, free_large_; ///< capacity <= or > slot_bytes
};

} // namespace crown::detail
