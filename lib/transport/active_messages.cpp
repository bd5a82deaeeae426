// Active messages over MPI two-sided: request, execution at the target, reply.
#include "active_messages.hpp"
#include "am_codec.hpp"
#include "buffer_registry.hpp"
#include "host_staging.hpp"
#include "shm_backend.hpp"
#include "staged_transfer.hpp"
#include <chrono>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstring>
#include <list>
#include <string>
#include <thread>
#include <utility>

namespace crown::detail {
namespace {

/// Payloads and data above this go apart from the request or reply, straight from and
/// into the caller's buffer; below it one message with a copy is cheaper.
constexpr std::size_t apart_bytes = 16 * 1024;

std::size_t total_bytes(std::span<const run> runs) {
  std::size_t bytes = 0;
  for (const run& r : runs) bytes += r.bytes;
  return bytes;
}

/// An MPI datatype for `runs` of the heap at `base` (absolute addresses, MPI_BOTTOM),
/// freed with the object; MPI_BYTE over the one run when there is one.
class heap_runs_type {
public:
  heap_runs_type(std::byte* base, std::span<const run> runs) {
    if (runs.size() == 1) {
      at_ = base + runs[0].offset;
      count_ = static_cast<int>(runs[0].bytes);
      return;
    }
    std::vector<int> lengths(runs.size());
    std::vector<MPI_Aint> addresses(runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i) {
      lengths[i] = static_cast<int>(runs[i].bytes);
      MPI_Get_address(base + runs[i].offset, &addresses[i]);
    }
    check_mpi(MPI_Type_create_hindexed(static_cast<int>(runs.size()), lengths.data(),
                                       addresses.data(), MPI_BYTE, &type_),
              "MPI_Type_create_hindexed(heap runs)");
    MPI_Type_commit(&type_);
  }
  ~heap_runs_type() {
    if (type_ != MPI_BYTE) MPI_Type_free(&type_); // pending operations keep their copy
  }
  heap_runs_type(const heap_runs_type&) = delete;
  heap_runs_type& operator=(const heap_runs_type&) = delete;
  [[nodiscard]] void* buffer() const noexcept { return type_ == MPI_BYTE ? at_ : MPI_BOTTOM; }
  [[nodiscard]] int count() const noexcept { return type_ == MPI_BYTE ? count_ : 1; }
  [[nodiscard]] MPI_Datatype type() const noexcept { return type_; }

private:
  std::byte* at_ = nullptr;
  int count_ = 1;
  MPI_Datatype type_ = MPI_BYTE;
};

} // namespace

[[noreturn]] void throw_am_refusal(const std::string& what, am_status status,
                                   std::size_t heap_size) {
  if (status == am_status::buffer_freed)
    throw state_error(what, "the remote_buffer was freed by its owner");
  if (status == am_status::outside_buffer)
    throw argument_error(what, "the target refused a request outside the remote_buffer");
  if (status == am_status::no_device_heap)
    throw state_error(what, "the target serves no device heap (it has none, or no peer on "
                            "another host was expected to reach it)");
  if (status == am_status::outside_device_heap)
    throw argument_error(what, "the target refused a request outside its device heap");
  if (status == am_status::too_large)
    throw argument_error(what, "the target refused a device-heap request larger than its "
                               "server's buffer");
  if (status == am_status::cancelled)
    throw state_error(what, "a staged request this rank cancelled was refused");
  if (status == am_status::device_failed)
    throw error(what, "the target's GPU failed to copy the data (the target's log names the "
                      "CUDA error)");
  throw argument_error(what, "the target refused a request outside its heap of " +
                                 std::to_string(heap_size) + " bytes");
}

/// One request in flight at the origin: its messages out (request, a put's payload)
/// and in (the reply with status word and an inline get's data, a get's data apart).
class am_op final : public async_op {
public:
  am_op(active_messages& am, int rank, am_kind kind, std::byte* packed, std::size_t bytes)
      : async_op(rank), am_(am), rank_(rank), kind_(kind), packed_(packed), bytes_(bytes) {}
  ~am_op() override { // requests are left only after an error: end them, never wait on one
    for (MPI_Request* r : {&in_[0], &in_[1]})
      if (*r != MPI_REQUEST_NULL) {
        MPI_Cancel(r);
        MPI_Wait(r, MPI_STATUS_IGNORE);
      }
    for (MPI_Request* r : {&out_[0], &out_[1]})
      if (*r != MPI_REQUEST_NULL) MPI_Request_free(r);
  }

  /// Sends `head` (its id set here) with `runs`: the payload inline or apart for puts,
  /// and posts the receives of the reply (and of a get's data apart) first.
  /// `counts`: a quiet must later cover it (every request but quiet's own marks).
  void send(am_header head, std::span<const run> runs, bool counts = true) {
    if (bytes_ > am_max_reply)
      throw argument_error(what(), "a piece above 2 GiB reached the transport unchunked");
    head.id = am_.next_id_++;
    if (counts) am_.note_sent(rank_);
    const bool inline_put = kind_ == am_kind::put || kind_ == am_kind::buffer_put;
    encode_am_request(head, runs, {packed_, inline_put ? bytes_ : std::size_t{0}}, request_);
    // The reply: a get's data inline, or an atomic's old value, then the status word.
    const std::size_t before = inline_get()               ? bytes_
                               : kind_ == am_kind::atomic ? sizeof(std::uint64_t)
                                                          : 0;
    reply_.assign(before + sizeof(std::uint64_t), std::byte{0});
    MPI_Comm comm = am_.comm_;
    const int reply_tag = am_reply_tag(head.id), data_tag = am_data_tag(head.id);
    check_mpi(MPI_Irecv(reply_.data(), static_cast<int>(reply_.size()), MPI_BYTE, rank_, reply_tag,
                        comm, &in_[0]),
              "active message: MPI_Irecv(reply)");
    if (am_get_apart(kind_))
      check_mpi(
          MPI_Irecv(packed_, static_cast<int>(bytes_), MPI_BYTE, rank_, data_tag, comm, &in_[1]),
          "active message: MPI_Irecv(data)");
    check_mpi(MPI_Isend(request_.data(), static_cast<int>(request_.size()), MPI_BYTE, rank_,
                        am_request_tag, comm, &out_[0]),
              "active message: MPI_Isend(request)");
    if (am_put_apart(kind_))
      check_mpi(
          MPI_Isend(packed_, static_cast<int>(bytes_), MPI_BYTE, rank_, data_tag, comm, &out_[1]),
          "active message: MPI_Isend(payload)");
  }

  bool test_local() override {
    if (finished_) return true;
    if (kind_ == am_kind::put || kind_ == am_kind::buffer_put || am_put_apart(kind_))
      return test_all(out_);
    return test_remote();
  }

  bool test_remote() override {
    if (finished_) return true;
    am_.progress();                   // the target may be waiting for us: serve while we wait
    if (in_[0] != MPI_REQUEST_NULL) { // the reply first: a refused get sends no data
      int done = 0;
      MPI_Status status;
      check_mpi(MPI_Test(&in_[0], &done, &status), "active message: MPI_Test(reply)");
      if (!done) {
        if ((++tests_ & 63) == 0) check_unreadable();
        return false;
      }
      int got = 0; // a refusal may be shorter than the reply asked for
      MPI_Get_count(&status, MPI_BYTE, &got);
      replied_ = static_cast<std::size_t>(got);
    }
    auto status = am_status::refused;
    if (replied_ >= sizeof status)
      std::memcpy(&status, reply_.data() + replied_ - sizeof status, sizeof status);
    if (status != am_status::ok) {
      finished_ = true; // the destructor cancels a get's data receive
      throw_am_refusal(what(), status, am_.heap_size_);
    }
    if (!test_all(in_) || !test_all(out_)) return false;
    if (inline_get()) std::memcpy(packed_, reply_.data(), bytes_);
    finished_ = true;
    return true;
  }

  /// An atomic's previous value (after remote completion).
  [[nodiscard]] std::uint64_t word() const {
    std::uint64_t old = 0;
    std::memcpy(&old, reply_.data(), sizeof old);
    return old;
  }

private:
  [[nodiscard]] bool inline_get() const noexcept {
    return kind_ == am_kind::get || kind_ == am_kind::buffer_get;
  }
  /// A refusal of a request too short to show its id names no operation: whichever of
  /// the target's origins finds it first fails (a real origin never sends one).
  void check_unreadable() {
    int arrived = 0;
    check_mpi(MPI_Iprobe(rank_, am_unreadable_tag, am_.comm_, &arrived, MPI_STATUS_IGNORE),
              "active message: MPI_Iprobe(refusal)");
    if (!arrived) return;
    std::uint64_t status[2] = {0, 0};
    MPI_Recv(status, sizeof status, MPI_BYTE, rank_, am_unreadable_tag, am_.comm_,
             MPI_STATUS_IGNORE);
    finished_ = true;
    throw argument_error(what(), "the target refused a request too short to show its id (this "
                                 "request, or another in flight to it, was corrupted)");
  }
  static bool test_all(MPI_Request (&r)[2], int count = 2) {
    int done = 0;
    check_mpi(MPI_Testall(count, r, &done, MPI_STATUSES_IGNORE), "active message: MPI_Testall");
    return done != 0;
  }
  std::string what() const { return "active message to rank " + std::to_string(rank_); }

  active_messages& am_;
  int rank_;
  am_kind kind_;
  std::byte* packed_;
  std::size_t bytes_;
  bool finished_ = false;
  unsigned tests_ = 0;
  std::size_t replied_ = 0; ///< bytes of the reply that arrived
  std::vector<std::byte> request_, reply_;
  MPI_Request out_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Request in_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

active_messages::active_messages(MPI_Comm world, std::byte* heap, std::size_t heap_size)
    : heap_(heap), heap_size_(heap_size) {
  check_mpi(MPI_Comm_dup(world, &comm_), "MPI_Comm_dup(active messages)");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int size = 0;
  MPI_Comm_size(comm_, &size);
  sent_to_.assign(static_cast<std::size_t>(size), 0);
  MPI_Comm_rank(comm_, &my_rank_);
}

void active_messages::note_sent(int rank) {
  const std::lock_guard lock(sent_mutex_);
  sent_to_[static_cast<std::size_t>(rank)] = 1;
}

void active_messages::quiet() {
  std::vector<int> targets;
  {
    const std::lock_guard lock(sent_mutex_);
    for (std::size_t r = 0; r < sent_to_.size(); ++r)
      if (std::exchange(sent_to_[r], 0)) targets.push_back(static_cast<int>(r));
  }
  std::list<am_op> marks;
  for (int r : targets) { // a get of nothing: executed after everything sent before it
    am_op& mark = marks.emplace_back(*this, r, am_kind::get, nullptr, 0);
    mark.send(am_header{am_kind::get, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {}, false);
  }
  for (am_op& mark : marks) wait_remote(mark, "quiet");
}

void active_messages::put_notify(int rank, std::span<const run> runs, const std::byte* packed,
                                 std::uint64_t flag, std::int64_t add) {
  const async_handle put = start(true, rank, runs, const_cast<std::byte*>(packed));
  am_op notify(*this, rank, am_kind::atomic, nullptr, 0);
  notify.send(am_header{am_kind::atomic, 0, 0, 0, flag, static_cast<std::uint64_t>(add), 0,
                        static_cast<std::uint32_t>(atomic_op::add), 8, 0},
              {});
  wait_remote(*put, "put_notify");
  wait_remote(notify, "put_notify");
}

active_messages::~active_messages() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  complete_sends();
  for (pending_send& s : sending_) { // replies nobody will receive any more
    MPI_Cancel(&s.request);
    MPI_Wait(&s.request, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&comm_);
}

async_handle active_messages::start(bool put, int rank, std::span<const run> runs,
                                    std::byte* packed) {
  return start_transfer(put, rank, runs, packed, nullptr);
}

async_handle active_messages::start_buffer(bool put, int rank, std::uint64_t id,
                                           std::uint32_t generation, std::span<const run> runs,
                                           std::byte* packed) {
  const buffer_name buffer{id, generation};
  return start_transfer(put, rank, runs, packed, &buffer);
}

async_handle active_messages::start_buffer_staged(bool put, int rank, std::uint64_t id,
                                                  std::uint32_t generation,
                                                  std::span<const run> runs,
                                                  std::uint64_t heap_offset, std::uint32_t ticket) {
  const am_kind kind = put ? am_kind::buffer_put_staged : am_kind::buffer_get_staged;
  const std::size_t bytes = total_bytes(runs);
  auto* op = new am_op(*this, rank, kind, nullptr, bytes);
  async_handle handle(op);
  // Complete, or cancelled and never to write, when the staged transfer returns: no
  // quiet needs to wait for its owner.
  op->send(am_header{kind, 0, runs.size(), bytes, id, heap_offset, generation, ticket, 0, 0}, runs,
           false);
  return handle;
}

async_handle active_messages::start_transfer(bool put, int rank, std::span<const run> runs,
                                             std::byte* packed, const buffer_name* buffer) {
  const std::size_t bytes = total_bytes(runs);
  const bool apart = bytes >= apart_bytes;
  const am_kind kind = buffer ? (put ? (apart ? am_kind::buffer_put_apart : am_kind::buffer_put)
                                     : (apart ? am_kind::buffer_get_apart : am_kind::buffer_get))
                              : (put ? (apart ? am_kind::put_apart : am_kind::put)
                                     : (apart ? am_kind::get_apart : am_kind::get));
  auto* op = new am_op(*this, rank, kind, packed, bytes);
  async_handle handle(op);
  op->send(am_header{kind, 0, runs.size(), bytes, buffer ? buffer->id : 0, 0,
                     buffer ? buffer->generation : 0, 0, 0, 0},
           runs);
  return handle;
}

std::uint64_t active_messages::atomic(int rank, std::uint64_t offset, atomic_op op, int width,
                                      bool floating, std::uint64_t operand, std::uint64_t compare) {
  am_op call(*this, rank, am_kind::atomic, nullptr, 0);
  call.send(am_header{am_kind::atomic, 0, 0, 0, offset, operand, compare,
                      static_cast<std::uint32_t>(op), static_cast<std::uint16_t>(width),
                      static_cast<std::uint16_t>(floating)},
            {});
  wait_remote(call, "atomic");
  return call.word();
}

bool active_messages::progress() noexcept {
  return serving_.run([this]() noexcept {
    bool moved = false;
    try {
      moved = posted_.serve(my_rank_);
      moved = complete_sends() || moved;
      for (;;) {
        int arrived = 0;
        MPI_Status status;
        check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, am_request_tag, comm_, &arrived, &status),
                  "MPI_Iprobe");
        if (!arrived) return moved;
        serve(status);
        moved = true;
      }
    } catch (const std::exception& e) {
      log(log_level::error, "serving one-sided requests failed: ", e.what());
    }
    return moved;
  });
}

void active_messages::serve(const MPI_Status& arrived) {
  requests_served().fetch_add(1, std::memory_order_relaxed);
  const int source = arrived.MPI_SOURCE;
  int size = 0;
  MPI_Get_count(&arrived, MPI_BYTE, &size);
  inbox_.resize(static_cast<std::size_t>(size));
  check_mpi(
      MPI_Recv(inbox_.data(), size, MPI_BYTE, source, am_request_tag, comm_, MPI_STATUS_IGNORE),
      "MPI_Recv(active message)");
  // A malformed request is refused (status 1), never executed; it still gets a reply
  // of the size the origin waits for, on its own tag, so that the origin raises an
  // error, not hangs. One too short to show its id is refused on am_unreadable_tag.
  const am_request_prefix prefix = read_am_prefix(inbox_);
  const am_header& h = prefix.head;
  reply_.clear();
  if (const auto r = decode_am_request(inbox_, heap_size_)) {
    am_status status = am_status::refused;
    try {
      status = execute(*r, source);
    } catch (const std::exception& e) {
      log(log_level::error, "a one-sided request from rank ", source, " failed: ", e.what());
    }
    if (status != am_status::ok) reply_.assign(am_refusal_bytes(h) - sizeof status, std::byte{0});
    return send_reply(source, am_reply_tag(h.id), status);
  }
  log(log_level::error, "refused a malformed one-sided request from rank ", source, " (",
      inbox_.size(), " bytes", prefix.id_known ? "" : ", too short to show its id", ")");
  if (prefix.id_known && am_put_apart(h.what)) drain_payload(source, am_data_tag(h.id));
  reply_.assign(am_refusal_bytes(h) - sizeof(std::uint64_t), std::byte{0});
  send_reply(source, prefix.id_known ? am_reply_tag(h.id) : am_unreadable_tag, am_status::refused);
}

void active_messages::drain_payload(int source, int tag) {
  // A well-formed origin sends the payload right behind the request; a malformed one
  // may send none, so look for a while rather than wait for ever.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  do {
    int arrived = 0;
    check_mpi(MPI_Iprobe(source, tag, comm_, &arrived, MPI_STATUS_IGNORE), "MPI_Iprobe");
    if (arrived) { // into no buffer: MPI reports the truncation and drops the bytes
      MPI_Recv(nullptr, 0, MPI_BYTE, source, tag, comm_, MPI_STATUS_IGNORE);
      return;
    }
    std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < until);
}

am_status active_messages::execute(const am_request& r, int source) {
  const am_header& h = r.head;
  switch (h.what) {
  case am_kind::buffer_put:
  case am_kind::buffer_get:
  case am_kind::buffer_put_apart:
  case am_kind::buffer_get_apart:
  case am_kind::buffer_put_staged:
  case am_kind::buffer_get_staged:
    return execute_on_buffer(r, source);
  case am_kind::put:
    shm_backend::transfer(true, heap_, r.runs, const_cast<std::byte*>(r.payload.data()));
    break;
  case am_kind::put_apart:
    receive_into(heap_, source, am_data_tag(h.id), r.runs, h.bytes);
    break;
  case am_kind::get:
    reply_.resize(h.bytes);
    shm_backend::transfer(false, heap_, r.runs, reply_.data());
    break;
  case am_kind::get_apart:
    send_from_heap(source, am_data_tag(h.id), r.runs);
    break;
  case am_kind::atomic: {
    const std::uint64_t old = cpu_atomic_any(heap_ + h.offset, static_cast<atomic_op>(h.op),
                                             h.width, h.floating != 0, h.operand, h.compare);
    reply_.resize(sizeof old);
    std::memcpy(reply_.data(), &old, sizeof old);
    break;
  }
  }
  return am_status::ok;
}

am_status active_messages::execute_on_buffer(const am_request& r, int source) {
  const am_header& h = r.head;
  if (am_staged_kind(h.what)) { // the origin's heap is mapped here: copy, reply the status only
    std::byte* data = heap_peer_address(source, h.operand);
    if (!data || h.offset == device_heap_buffer) return am_status::refused;
    const am_status status =
        serve_staged_request(h.what == am_kind::buffer_put_staged, h.offset,
                             static_cast<std::uint32_t>(h.compare), r.runs, data, h.op);
    // Its later requests come without MPI.
    posted_.watch(source, h.operand, heap_size_, my_rank_, static_cast<int>(sent_to_.size()));
    return status;
  }
  if (h.offset == device_heap_buffer) return execute_on_device(r, source);
  const int tag = am_data_tag(h.id);
  if (h.what == am_kind::buffer_get) reply_.resize(h.bytes);
  // Under the owner's registry lock: the data moves straight between the buffer and
  // MPI, and the apart ones block until their message is through (the origin posted
  // its receive, or sent the payload, before the request), so that nothing reads or
  // writes the buffer once the lock is released and its owner may free it.
  const am_status status = serve_buffer_request(
      h.offset, static_cast<std::uint32_t>(h.compare), r.runs, [&](std::byte* base) {
        switch (h.what) {
        case am_kind::buffer_put:
          return shm_backend::transfer(true, base, r.runs,
                                       const_cast<std::byte*>(r.payload.data()));
        case am_kind::buffer_get:
          return shm_backend::transfer(false, base, r.runs, reply_.data());
        case am_kind::buffer_put_apart:
          return receive_into(base, source, tag, r.runs, h.bytes);
        default: {
          const heap_runs_type from(base, r.runs);
          check_mpi(MPI_Send(from.buffer(), from.count(), from.type(), source, tag, comm_),
                    "MPI_Send(remote_buffer data)");
        }
        }
      });
  if (status != am_status::ok && h.what == am_kind::buffer_put_apart) drain_payload(source, tag);
  return status;
}

am_status active_messages::execute_on_device(const am_request& r, int source) {
  const am_header& h = r.head;
  const int tag = am_data_tag(h.id);
  const bool put = h.what == am_kind::buffer_put || h.what == am_kind::buffer_put_apart;
  if (h.what == am_kind::buffer_get) reply_.resize(h.bytes);
  const run packed{0, h.bytes};
  bool moved = false; // the payload or data went through the network step
  const auto drain_unless_moved = [&] {
    if (!moved && h.what == am_kind::buffer_put_apart) drain_payload(source, tag);
  };
  am_status status = am_status::refused;
  try {
    status = serve_device_request(put, r.runs, [&](std::byte* host) {
      moved = true;
      switch (h.what) {
      case am_kind::buffer_put:
        std::memcpy(host, r.payload.data(), h.bytes);
        return;
      case am_kind::buffer_get:
        std::memcpy(reply_.data(), host, h.bytes);
        return;
      case am_kind::buffer_put_apart:
        return receive_into(host, source, tag, {&packed, 1}, h.bytes);
      default: // blocking: the server's host memory is reused by the next request
        check_mpi(MPI_Send(host, static_cast<int>(h.bytes), MPI_BYTE, source, tag, comm_),
                  "MPI_Send(device heap data)");
      }
    });
  } catch (...) {
    drain_unless_moved(); // no stale payload is left for a later request's tag
    throw;
  }
  if (status != am_status::ok) drain_unless_moved();
  return status;
}

void active_messages::receive_into(std::byte* base, int source, int tag, std::span<const run> runs,
                                   std::size_t bytes) {
  // The origin sent the payload with the request, so this receive does not wait on it
  // (and a shared-memory MPI copies it once, straight into place).
  const heap_runs_type into(base, runs);
  MPI_Status status;
  check_mpi(MPI_Recv(into.buffer(), into.count(), into.type(), source, tag, comm_, &status),
            "MPI_Recv(active message payload)");
  int got = 0;
  MPI_Get_count(&status, MPI_BYTE, &got);
  if (static_cast<std::size_t>(got) != bytes)
    throw argument_error("active message from rank " + std::to_string(source),
                         std::to_string(got) + " payload bytes for a put of " +
                             std::to_string(bytes));
}

void active_messages::send_from_heap(int source, int tag, std::span<const run> runs) {
  const heap_runs_type from(heap_, runs);
  pending_send& s = sending_.emplace_back();
  check_mpi(MPI_Isend(from.buffer(), from.count(), from.type(), source, tag, comm_, &s.request),
            "MPI_Isend(active message data)");
}

void active_messages::send_reply(int source, int tag, am_status status) {
  pending_send& s = sending_.emplace_back();
  s.bytes.swap(reply_);
  const std::size_t at = s.bytes.size();
  s.bytes.resize(at + sizeof status);
  std::memcpy(s.bytes.data() + at, &status, sizeof status);
  check_mpi(MPI_Isend(s.bytes.data(), static_cast<int>(s.bytes.size()), MPI_BYTE, source, tag,
                      comm_, &s.request),
            "MPI_Isend(active message reply)");
}

bool active_messages::complete_sends() noexcept {
  const std::size_t before = sending_.size();
  for (auto it = sending_.begin(); it != sending_.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? sending_.erase(it) : std::next(it);
  }
  return sending_.size() != before;
}

} // namespace crown::detail
