// lib/actor/channel.hpp — how controller messages travel between ranks. To a rank of
// this host a message is copied into that rank's mailbox (mailbox.hpp), with no MPI call;
// to any other rank it goes over MPI, where receives are posted ahead into a ring of
// fixed slots (an arriving message is matched at once, with no probe, and copied out
// into a pooled buffer so that its slot is posted again soon). Sends reuse pooled
// buffers. A mailbox takes messages up to half its ring; a larger one, or one larger
// than a slot to a rank without a mailbox, goes as a notice (through the mailbox where
// there is one) followed by its body over MPI. Messages from one rank to another arrive
// in the order they were sent.
#pragma once
#include "mailbox.hpp"
#include <any>
#include <array>
#include <chrono>
#include <crown/detail/archive.hpp>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mpi.h>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace crown::detail {

using message_buffer = std::shared_ptr<std::vector<std::byte>>;
class channel;

/// The attachments of one command (large arguments) as they arrive from its sender:
/// each straight into a std::vector of its element type where the sender named one
/// (the parameter that reads it takes it: no copy), else into uninitialised pooled
/// storage (no zero fill, no new pages for a repeated size); both kept for the next
/// command and aligned for any arithmetic type. Pieces are forwarded down the tree as
/// they arrive (channel::receive_bulk).
class bulk_in {
public:
  bulk_in() = default;
  bulk_in(const bulk_in&) = delete;
  bulk_in& operator=(const bulk_in&) = delete;
  ~bulk_in(); ///< the storage, and the vectors no parameter took, go back to the pools
  [[nodiscard]] bool complete() const noexcept { return outstanding_ == 0; }
  /// What arrived, for the endpoint; its vectors only once the pieces went on to every
  /// rank below (sends read them until then).
  [[nodiscard]] arrived_attachments arrived() noexcept;
  /// Why the bytes do not match the command ("" when they do): a piece of another size
  /// than announced, or no memory for them (the pieces were received and dropped).
  [[nodiscard]] const std::string& failure() const noexcept { return failure_; }

private:
  friend class channel;
  struct piece {
    std::byte* at; ///< where it goes (null: no storage, see failure())
    std::size_t bytes;
    MPI_Request request = MPI_REQUEST_NULL;
    bool whole = false;             ///< matched as announced, into the storage
    std::vector<std::byte> spill{}; ///< where a piece unlike its announcement goes
  };
  std::byte* storage_ = nullptr;
  std::size_t capacity_ = 0;
  std::vector<std::span<const std::byte>> parts_;
  std::vector<std::any> vectors_; ///< per part: the std::vector it arrives in, or empty
  bool stored_ = false;           ///< storage for every part was had
  const channel* via_ = nullptr;
  std::uint64_t forwarded_ = 0; ///< the serial of its last forwarded piece
  std::vector<piece> pieces_;
  std::size_t outstanding_ = 0, next_post_ = 0, next_forward_ = 0, spilling_ = 0;
  int source_ = -1, tag_ = 0, forward_tag_ = 0;
  std::vector<int> forward_;
  std::string failure_;
};

class channel {
public:
  static constexpr std::size_t slot_bytes = 16 << 10;
  static constexpr std::size_t slots = 8;

  /// Over `comm`; ranks that `boxes` maps are reached through their mailboxes.
  explicit channel(MPI_Comm comm, const mailbox_map& boxes = {});
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
  /// Sends a copy of `bytes` to `dest`: straight into its mailbox when it has one with
  /// room and nothing waits before it (no buffer to take and recycle: a small port
  /// message's cost), else as send() of a buffer.
  void send_copy(std::span<const std::byte> bytes, int dest);
  /// The tag for the next command this rank sends or forwards with attachments.
  int next_bulk_tag() noexcept;
  /// Sends `parts` to `dest` on `tag`, in pieces of `piece_bytes`, without copying: they
  /// stay alive until sent, held by `keep` or by a caller that waits for sent(). Returns
  /// the serial number of the last piece.
  std::uint64_t send_bulk(std::span<const std::span<const std::byte>> parts,
                          std::size_t piece_bytes, int dest, int tag,
                          const std::shared_ptr<const void>& keep);
  /// True once every send up to `serial` has completed (sends retire in order).
  [[nodiscard]] bool sent(std::uint64_t serial) const noexcept { return retired_ >= serial; }
  /// Receives attachments of `sizes` from `source` on `tag` (each into a std::vector of
  /// the type its code in `elements` names, where it names one), and sends each piece on
  /// to `forward` (on `forward_tag`) as soon as it is here. Progressed by progress_bulk().
  std::shared_ptr<bulk_in> receive_bulk(int source, int tag, std::span<const std::uint64_t> sizes,
                                        std::size_t piece_bytes, std::vector<int> forward,
                                        int forward_tag,
                                        std::span<const std::uint8_t> elements = {});
  /// Tests the pieces of every bulk receive under way and forwards those that arrived.
  void progress_bulk();
  /// Retires completed sends (one MPI call when any are pending, none otherwise). Only
  /// the oldest `send_window` are tested: sends complete roughly in order, and the cost
  /// of a poll must not grow with the number of messages in flight.
  void poll_sends();
  static constexpr std::size_t send_window = 64;
  /// One MPI call (a probe) where nothing else of this channel calls MPI: a rank whose
  /// peers all have mailboxes, with no send pending. Open MPI finishes its side of a
  /// transfer only inside some MPI call of this rank (a received piece's acknowledgement
  /// that found no free shared-memory fragment waits there), so a sender of pieces this
  /// rank has already received would wait for ever on an idle rank. Called every few
  /// progress passes.
  void keep_mpi_moving();
  /// Sends handed to MPI at once; more wait in this channel's queue (MPI's own queues
  /// are searched linearly, so tens of thousands in flight there cost quadratic time).
  static constexpr std::size_t sends_in_mpi = 256;
  /// Waits for every send. Messages still waiting for room in the mailbox of a rank
  /// that takes none of them for `patience` are dropped and logged: at the end of a
  /// session that rank has left (as a small MPI message to a rank that left is received
  /// by nobody), and waiting for it would hang the job.
  void drain_sends(std::chrono::duration<double> patience = std::chrono::seconds(30));

  struct incoming {
    std::span<const std::byte> bytes; ///< the message, in `owned`
    int source = -1;
    message_buffer owned; ///< its buffer (recycle() it when done)
    /// A command's attachments, all arrived (the command was forwarded on arrival).
    std::shared_ptr<bulk_in> bulk;
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
  /// The next small message or notice, from the mailbox or MPI's slots (alternately,
  /// where both carry traffic, so neither starves the other).
  bool next_small(message_buffer& bytes, int& source);
  bool take_from_mailbox(message_buffer& bytes, int& source);
  bool take_from_slots(message_buffer& bytes, int& source);
  void post(slot& s);
  void repost(); ///< posts the slots consumed since MPI was last asked, in ring order
  std::size_t unposted_ = 0;
  void match_announced(); ///< turns arrived bodies into receives (or drops false ones)

  /// Into the mailbox of `dest`, or behind those waiting for room there.
  void send_local(const message_buffer& data, int dest);
  void flush_local(); ///< retries the waiting ones, each destination's in order
  void recycle_local_sent();

  MPI_Comm comm_;
  int rank_ = 0, size_ = 0;
  // Mailboxes: this rank's, the other ranks' of its host, and what waits for their room.
  std::optional<mailbox> inbox_;
  struct local_peer {
    std::optional<mailbox> box; ///< none: the rank is reached over MPI
    /// Copies of the messages that found its mailbox full, in order, each a u32 size
    /// and its bytes, from `first` on: the sender's buffer goes back to the pool at
    /// once, and thousands of messages waiting cost their bytes, not an allocation each.
    std::vector<std::byte> waiting;
    std::size_t first = 0;
    bool listed = false; ///< in full_
  };
  /// Rank `dest` when it is reached through its mailbox, else null.
  local_peer* mailbox_peer(int dest) noexcept;
  std::vector<local_peer> local_;          ///< by rank; empty without mailboxes
  std::vector<int> full_;                  ///< the ranks with messages waiting
  bool mpi_peers_ = true;                  ///< some rank is reached over MPI: the slots are posted
  bool slots_first_ = false;               ///< the next receive looks at MPI's slots first
  std::vector<message_buffer> local_sent_; ///< copied in: recycled at the next poll
  bool flush_peer(local_peer& peer);       ///< true once none of its messages waits
  std::array<slot, slots> ring_;
  std::size_t head_ = 0;
  bool sweep_ = false; ///< the last receive found a message: test every slot next
  std::vector<large_receive> large_;
  std::vector<announced> announced_; ///< in arrival order (one sender's bodies stay in order)
  /// A send: a pooled buffer, or bytes that `keep` holds alive (or the caller's).
  struct outgoing {
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    int dest = 0, tag = 0;
    message_buffer buffer;
    std::shared_ptr<const void> keep;
  };
  struct pending_send {
    MPI_Request request;
    outgoing what;
  };
  std::deque<pending_send> sends_; ///< oldest first; done ones wait for those before them
  std::deque<outgoing> queued_;    ///< not yet handed to MPI, in order
  std::uint64_t queued_total_ = 0, retired_ = 0; ///< sends made and completed (serials)
  void enqueue(outgoing o);
  void start_send(outgoing o);
  void test_bulk(const std::shared_ptr<bulk_in>& b);
  std::vector<std::weak_ptr<bulk_in>> arriving_;
  int next_bulk_tag_ = 0;
  std::vector<MPI_Request> window_;
  std::vector<int> done_;
  std::vector<message_buffer> free_small_, free_large_; ///< capacity <= or > slot_bytes
};

} // namespace crown::detail
