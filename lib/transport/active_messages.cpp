// Active messages over MPI two-sided: request, execution at the target, reply.
#include "active_messages.hpp"
#include "../runtime/tags.hpp"
#include "am_codec.hpp"
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstring>
#include <string>

namespace crown::detail {
namespace {

constexpr int request_tag = tags::am_request.first;
/// Replies carry the request's id in their tag (lib/runtime/tags.hpp).
int reply_tag(std::uint32_t id) { return tags::am_reply_tag(id); }

/// What the origin sends: header, runs, payload (am_codec.hpp).
std::vector<std::byte> request_for(const am_header& h, std::span<const run> runs,
                                   const std::byte* payload, std::size_t payload_bytes) {
  std::vector<std::byte> msg;
  encode_am_request(h, runs, {payload, payload_bytes}, msg);
  return msg;
}

} // namespace

active_messages::active_messages(MPI_Comm world, std::byte* heap, std::size_t heap_size)
    : heap_(heap), heap_size_(heap_size) {
  check_mpi(MPI_Comm_dup(world, &comm_), "MPI_Comm_dup(active messages)");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

active_messages::~active_messages() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

std::vector<std::byte> active_messages::call(int rank, std::vector<std::byte>& request,
                                             std::size_t reply_bytes) {
  if (request.size() > static_cast<std::size_t>(INT32_MAX) || reply_bytes > INT32_MAX)
    throw argument_error("active message to rank " + std::to_string(rank),
                         "a piece above 2 GiB reached the transport unchunked");
  am_header h;
  std::memcpy(&h, request.data(), sizeof h);
  h.id = next_id_++;
  std::memcpy(request.data(), &h, sizeof h);
  std::vector<std::byte> reply(reply_bytes + sizeof(std::uint64_t));
  MPI_Request r[2];
  check_mpi(MPI_Irecv(reply.data(), static_cast<int>(reply.size()), MPI_BYTE, rank, reply_tag(h.id),
                      comm_, &r[0]),
            "active message: MPI_Irecv(reply)");
  check_mpi(MPI_Isend(request.data(), static_cast<int>(request.size()), MPI_BYTE, rank, request_tag,
                      comm_, &r[1]),
            "active message: MPI_Isend(request)");
  int done = 0;
  backoff pause;
  for (;;) {
    check_mpi(MPI_Testall(2, r, &done, MPI_STATUSES_IGNORE), "active message: MPI_Testall");
    if (done) break;
    progress(); // the target may be waiting for us: serve while we wait
    pause.pause();
  }
  std::uint64_t status = 0;
  std::memcpy(&status, reply.data() + reply_bytes, sizeof status);
  if (status != 0)
    throw argument_error("active message to rank " + std::to_string(rank),
                         "the target refused a request outside its heap of " +
                             std::to_string(heap_size_) + " bytes");
  reply.resize(reply_bytes);
  return reply;
}

void active_messages::put(int rank, std::span<const run> runs, const std::byte* packed) {
  std::size_t bytes = 0;
  for (const run& r : runs) bytes += r.bytes;
  am_header h{am_kind::put, 0, runs.size(), bytes, 0, 0, 0, 0, 0, 0};
  auto msg = request_for(h, runs, packed, bytes);
  (void)call(rank, msg, 0);
}

void active_messages::get(int rank, std::span<const run> runs, std::byte* packed) {
  std::size_t bytes = 0;
  for (const run& r : runs) bytes += r.bytes;
  am_header h{am_kind::get, 0, runs.size(), bytes, 0, 0, 0, 0, 0, 0};
  auto msg = request_for(h, runs, nullptr, 0);
  const auto data = call(rank, msg, bytes);
  std::memcpy(packed, data.data(), bytes);
}

std::uint64_t active_messages::atomic(int rank, std::uint64_t offset, atomic_op op, int width,
                                      bool floating, std::uint64_t operand, std::uint64_t compare) {
  am_header h{am_kind::atomic,
              0,
              0,
              0,
              offset,
              operand,
              compare,
              static_cast<std::uint32_t>(op),
              static_cast<std::uint16_t>(width),
              static_cast<std::uint16_t>(floating)};
  auto msg = request_for(h, {}, nullptr, 0);
  const auto data = call(rank, msg, sizeof(std::uint64_t));
  std::uint64_t old = 0;
  std::memcpy(&old, data.data(), sizeof old);
  return old;
}

void active_messages::progress() noexcept {
  if (!serving_.try_lock()) return; // another thread is serving
  const std::lock_guard lock(serving_, std::adopt_lock);
  try {
    for (;;) {
      int arrived = 0;
      MPI_Status status;
      check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, request_tag, comm_, &arrived, &status), "MPI_Iprobe");
      if (!arrived) return;
      int size = 0;
      MPI_Get_count(&status, MPI_BYTE, &size);
      inbox_.resize(static_cast<std::size_t>(size));
      check_mpi(MPI_Recv(inbox_.data(), size, MPI_BYTE, status.MPI_SOURCE, request_tag, comm_,
                         MPI_STATUS_IGNORE),
                "MPI_Recv(active message)");
      // A malformed request is refused (status 1), never executed; it still gets a reply
      // of the size the origin waits for, so that the origin raises an error, not hangs.
      am_header h{};
      if (inbox_.size() >= sizeof h) std::memcpy(&h, inbox_.data(), sizeof h);
      std::uint64_t refused = 1;
      reply_.clear();
      if (const auto r = decode_am_request(inbox_, heap_size_)) {
        execute(*r);
        refused = 0;
      } else {
        log(log_level::error, "refused a malformed one-sided request from rank ", status.MPI_SOURCE,
            " (", inbox_.size(), " bytes)");
        reply_.assign(h.what == am_kind::get && h.bytes <= am_max_reply ? h.bytes
                      : h.what == am_kind::atomic                       ? sizeof(std::uint64_t)
                                                                        : 0,
                      std::byte{0});
      }
      const std::size_t at = reply_.size();
      reply_.resize(at + sizeof refused);
      std::memcpy(reply_.data() + at, &refused, sizeof refused);
      check_mpi(MPI_Send(reply_.data(), static_cast<int>(reply_.size()), MPI_BYTE,
                         status.MPI_SOURCE, reply_tag(h.id), comm_),
                "MPI_Send(active message reply)");
    }
  } catch (const std::exception& e) {
    log(log_level::error, "serving one-sided requests failed: ", e.what());
  }
}

void active_messages::execute(const am_request& r) {
  const am_header& h = r.head;
  if (h.what == am_kind::put) {
    const std::byte* payload = r.payload.data();
    for (const run& piece : r.runs) {
      std::memcpy(heap_ + piece.offset, payload, piece.bytes);
      payload += piece.bytes;
    }
  } else if (h.what == am_kind::get) {
    reply_.resize(h.bytes);
    std::byte* out = reply_.data();
    for (const run& piece : r.runs) {
      std::memcpy(out, heap_ + piece.offset, piece.bytes);
      out += piece.bytes;
    }
  } else {
    const std::uint64_t old = cpu_atomic_any(heap_ + h.offset, static_cast<atomic_op>(h.op),
                                             h.width, h.floating != 0, h.operand, h.compare);
    reply_.resize(sizeof old);
    std::memcpy(reply_.data(), &old, sizeof old);
  }
}

} // namespace crown::detail
