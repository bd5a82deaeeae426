// lib/transport/active_messages.hpp — one-sided traffic as requests over two-sided MPI.
#pragma once
#include "am_codec.hpp"
#include "backend.hpp"
#include "host_staging.hpp"
#include <atomic>
#include <list>
#include <mpi.h>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace crown::detail {

/// Throws what a target's refusal `status` means, `what` naming the operation (a heap
/// of `heap_size` bytes for a request outside it).
[[noreturn]] void throw_am_refusal(const std::string& what, am_status status,
                                   std::size_t heap_size);

/// The cross-host path for networks without RDMA (CROWN_TRANSPORT=am): a put, get or
/// atomic is one request message to the target and one reply back, on a communicator of
/// its own. The target executes it on its heap (atomics as CPU atomics, so they are
/// atomic with every other atomic on the word) when it progresses: inside every Crown
/// wait, transfer and collective, and on the progress thread. Large payloads move
/// without copies on the origin: a put's payload and a get's data travel as messages of
/// their own, straight from and into the caller's buffer (and the target's heap).
class active_messages final : public backend {
public:
  active_messages(MPI_Comm world, std::byte* heap, std::size_t heap_size);
  ~active_messages() override;
  active_messages(const active_messages&) = delete;
  active_messages& operator=(const active_messages&) = delete;

  [[nodiscard]] const char* name() const noexcept override { return "am"; }
  async_handle start(bool put, int rank, std::span<const run> runs, std::byte* packed) override;
  std::uint64_t atomic(int rank, std::uint64_t offset, atomic_op op, int width, bool floating,
                       std::uint64_t operand, std::uint64_t compare) override;
  /// A transfer to or from remote_buffer `id` (of `generation`) that `rank` owns: runs
  /// are offsets inside it, the data travels inline, and the owner copies it under its
  /// registry's lock, so a buffer freed meanwhile is refused, never touched. Buffer
  /// device_heap_buffer is the target's device heap (staged_transfer.hpp).
  async_handle start_buffer(bool put, int rank, std::uint64_t id, std::uint32_t generation,
                            std::span<const run> runs, std::byte* packed);
  /// The same between the buffer and this rank's heap at `heap_offset`, for an owner
  /// that maps this rank's heap (one host): the owner copies the bytes itself, so only
  /// the request and its status word cross MPI. The 8 bytes before `heap_offset` hold
  /// `ticket` (am_codec.hpp); the heap bytes stay untouched until remote completion.
  async_handle start_buffer_staged(bool put, int rank, std::uint64_t id, std::uint32_t generation,
                                   std::span<const run> runs, std::uint64_t heap_offset,
                                   std::uint32_t ticket);
  /// The put and the atomic go out back to back: the target serves one origin's
  /// requests in order, so one round trip does both.
  void put_notify(int rank, std::span<const run> runs, const std::byte* packed, std::uint64_t flag,
                  std::int64_t add) override;
  /// Nothing to do: the target executes one origin's requests in the order sent.
  void fence() override {}
  /// A no-op request to every target sent anything since the last quiet: its reply
  /// comes after every earlier request was executed there.
  void quiet() override;
  /// Executes every request that has arrived, and those posted in the staging slots of
  /// readers on this host that it watches (one thread serves at a time).
  bool progress() noexcept override;
  /// Only the requests posted in watched slots: no MPI call (a staged transfer's
  /// reader serves its own owners this way while it waits for its chunks).
  bool serve_posted() noexcept {
    return serving_.run([this]() noexcept { return posted_.serve(my_rank_); });
  }
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }

private:
  friend class am_op;
  /// A reply (or a get's data) still being sent by the serving thread.
  struct pending_send {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<std::byte> bytes;
  };
  void serve(const MPI_Status& arrived);
  /// Fills reply_, or sends a get's data; a buffer request may be refused.
  am_status execute(const am_request& r, int source);
  void send_reply(int source, int tag, am_status status);
  struct buffer_name {
    std::uint64_t id;
    std::uint32_t generation;
  };
  /// A heap transfer, or one to the remote_buffer `buffer` names.
  async_handle start_transfer(bool put, int rank, std::span<const run> runs, std::byte* packed,
                              const buffer_name* buffer);
  /// A remote_buffer request, under its owner's registry lock.
  am_status execute_on_buffer(const am_request& r, int source);
  /// A request for this rank's device heap, through the device server's host memory.
  am_status execute_on_device(const am_request& r, int source);
  void send_from_heap(int source, int tag, std::span<const run> runs);
  void receive_into(std::byte* base, int source, int tag, std::span<const run> runs,
                    std::size_t bytes);
  void drain_payload(int source, int tag);
  bool complete_sends() noexcept; ///< true when one finished
  void note_sent(int rank);

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::byte* heap_;
  std::size_t heap_size_;
  progress_gate serving_;                ///< one thread serves requests at a time
  std::vector<std::byte> inbox_, reply_; ///< reused by the serving thread
  std::list<pending_send> sending_;      ///< by the serving thread
  std::atomic<std::uint32_t> next_id_{0};
  std::mutex sent_mutex_;
  std::vector<char> sent_to_; ///< per rank: requests sent there since the last quiet
  posted_slots posted_;       ///< by the serving thread
  int my_rank_ = 0;           ///< in comm_, a copy of the world
};

} // namespace crown::detail
