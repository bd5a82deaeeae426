// Controller messages over MPI point-to-point (lib/actor/channel.hpp).
#include "channel.hpp"
#include "protocol.hpp"
#include <algorithm>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstdint>
#include <cstring>
#include <string>

namespace crown::detail {
namespace {

constexpr int small_tag = 1; ///< messages that fit a slot, and notices
constexpr int large_tag = 2; ///< bodies of larger messages, announced by a notice

void check(int rc, const char* call, int rank) {
  if (rc != MPI_SUCCESS)
    check_mpi(rc,
              std::string("controller channel: ") + call + " with rank " + std::to_string(rank));
}

} // namespace

channel::channel(MPI_Comm comm) : comm_(comm) {
  for (slot& s : ring_) post(s);
}

channel::~channel() {
  for (slot& s : ring_) {
    if (s.request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&s.request);
    MPI_Wait(&s.request, MPI_STATUS_IGNORE);
  }
  for (large_receive& l : large_) {
    MPI_Cancel(&l.request);
    MPI_Wait(&l.request, MPI_STATUS_IGNORE);
  }
  drain_sends();
}

void channel::post(slot& s) {
  check(MPI_Irecv(s.bytes.data(), static_cast<int>(slot_bytes), MPI_BYTE, MPI_ANY_SOURCE, small_tag,
                  comm_, &s.request),
        "MPI_Irecv", -1);
}

message_buffer channel::acquire(std::size_t bytes) {
  auto take = [](std::vector<message_buffer>& from) {
    message_buffer b = std::move(from.back());
    from.pop_back();
    b->clear();
    return b;
  };
  if (bytes <= slot_bytes && !free_small_.empty()) return take(free_small_);
  if (!free_large_.empty() && free_large_.back()->capacity() >= bytes) return take(free_large_);
  auto b = std::make_shared<std::vector<std::byte>>();
  b->reserve(bytes);
  return b;
}

void channel::recycle(message_buffer b) {
  if (!b || b.use_count() != 1) return;
  if (b->capacity() <= slot_bytes) {
    // Up to 64 of any size (<= 16 KiB), and up to 1024 in all of those <= 1 KiB: a
    // thousand calls in flight each hold one, and a pool that runs dry costs two
    // allocations per message (what made 40,000 calls in flight superlinear).
    if (free_small_.size() < 64 || (b->capacity() <= 1024 && free_small_.size() < 1024))
      free_small_.push_back(std::move(b));
    return;
  }
  // Two large ones are kept, the largest seen, largest last (acquire looks there).
  free_large_.push_back(std::move(b));
  std::sort(free_large_.begin(), free_large_.end(),
            [](const message_buffer& x, const message_buffer& y) {
              return x->capacity() < y->capacity();
            });
  if (free_large_.size() > 2) free_large_.erase(free_large_.begin());
}

void channel::send(const message_buffer& data, int dest) {
  if (data->size() > static_cast<std::size_t>(INT32_MAX))
    throw argument_error("controller message to rank " + std::to_string(dest),
                         std::to_string(data->size()) + " bytes exceed MPI's count limit");
  auto isend = [&](const message_buffer& b, int tag) {
    if (sends_.size() < sends_in_mpi && queued_.empty())
      start_send(b, dest, tag);
    else
      queued_.push_back({b, dest, tag});
  };
  if (data->size() <= slot_bytes) return isend(data, small_tag);
  // The notice announces a body on large_tag from this rank: MPI keeps one sender's
  // messages on one tag in order, so the n-th notice goes with the n-th body.
  message_buffer n = acquire();
  encode_notice(data->size(), *n);
  isend(n, small_tag);
  isend(data, large_tag);
}

void channel::start_send(message_buffer b, int dest, int tag) {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Isend(b->data(), static_cast<int>(b->size()), MPI_BYTE, dest, tag, comm_, &r),
        "MPI_Isend", dest);
  sends_.push_back({r, std::move(b)});
}

void channel::poll_sends() {
  const std::size_t n = std::min(sends_.size(), send_window);
  if (n == 0) return;
  window_.clear();
  for (std::size_t i = 0; i < n; ++i) window_.push_back(sends_[i].request);
  int count = 0;
  done_.resize(n);
  check(
      MPI_Testsome(static_cast<int>(n), window_.data(), &count, done_.data(), MPI_STATUSES_IGNORE),
      "MPI_Testsome", -1);
  for (std::size_t i = 0; i < n; ++i) sends_[i].request = window_[i];
  while (!sends_.empty() && sends_.front().request == MPI_REQUEST_NULL) {
    recycle(std::move(sends_.front().buffer));
    sends_.pop_front();
  }
  while (!queued_.empty() && sends_.size() < sends_in_mpi) { // in order: MPI keeps it
    queued_send& q = queued_.front();
    start_send(std::move(q.buffer), q.dest, q.tag);
    queued_.pop_front();
  }
}

void channel::drain_sends() {
  backoff pause(wait_site{"sending the last controller messages"});
  for (poll_sends(); !sends_.empty() || !queued_.empty(); poll_sends()) pause.pause();
}

bool channel::receive(incoming& m) {
  for (;;) { // notices are consumed here until a whole message is ready, or none is
    if (!announced_.empty()) match_announced();
    for (std::size_t i = 0; i < large_.size(); ++i) {
      int done = 0;
      check(MPI_Test(&large_[i].request, &done, MPI_STATUS_IGNORE), "MPI_Test", large_[i].source);
      if (!done) continue;
      if (large_[i].discard) {
        recycle(std::move(large_[i].body));
        large_.erase(large_.begin() + static_cast<std::ptrdiff_t>(i--));
        continue;
      }
      m.owned = std::move(large_[i].body);
      m.bytes = *m.owned;
      m.source = large_[i].source;
      large_.erase(large_.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
    slot& s = ring_[head_];
    if (!s.arrived) {
      // After a message, one MPI_Testsome finds the rest of a burst; when idle, the
      // head alone is tested (cheaper per call: a round trip waits in this loop).
      if (sweep_) {
        sweep_ = test_slots();
        if (!sweep_) return false;
      } else {
        int done = 0;
        check(MPI_Test(&s.request, &done, &s.status), "MPI_Test", -1);
        if (!done) return false;
        s.arrived = true;
        sweep_ = true;
      }
    }
    s.arrived = false;
    const MPI_Status status = s.status;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    // The message gets a pooled buffer of its own (a copy of its bytes only) and the
    // slot is posted again at once: a message outlives later receives (a command's
    // endpoint may wait in get() and receive more), and no slot is ever held.
    message_buffer bytes = acquire(static_cast<std::size_t>(count));
    bytes->assign(s.bytes.begin(), s.bytes.begin() + count);
    post(s);
    head_ = (head_ + 1) % slots;
    const auto announced_bytes = notice_bytes(*bytes, slot_bytes);
    if (!announced_bytes) {
      m.owned = std::move(bytes);
      m.bytes = *m.owned;
      m.source = status.MPI_SOURCE;
      return true;
    }
    recycle(std::move(bytes));
    if (*announced_bytes == 0) {
      log(log_level::error, "controller channel: dropped a notice of an impossible size from rank ",
          status.MPI_SOURCE);
      continue;
    }
    announced_.push_back({status.MPI_SOURCE, *announced_bytes}); // the body may be there already
  }
}

bool channel::test_slots() {
  // Receives match in the order they were posted, so arrived slots follow the head in
  // ring order: one MPI_Testsome finds a burst of messages (one progress pass, not one
  // per message).
  std::array<MPI_Request, slots> requests;
  for (std::size_t i = 0; i < slots; ++i) requests[i] = ring_[i].request;
  std::array<int, slots> index;
  std::array<MPI_Status, slots> statuses;
  int count = 0;
  check(
      MPI_Testsome(static_cast<int>(slots), requests.data(), &count, index.data(), statuses.data()),
      "MPI_Testsome", -1);
  for (int k = 0; k < count && count != MPI_UNDEFINED; ++k) {
    slot& s = ring_[static_cast<std::size_t>(index[static_cast<std::size_t>(k)])];
    s.request = MPI_REQUEST_NULL;
    s.arrived = true;
    s.status = statuses[static_cast<std::size_t>(k)];
  }
  return ring_[head_].arrived;
}

void channel::match_announced() {
  // Only the oldest notice of each sender can be matched: its later bodies come after.
  std::vector<int> waiting_sources;
  for (auto it = announced_.begin(); it != announced_.end();) {
    if (std::find(waiting_sources.begin(), waiting_sources.end(), it->source) !=
        waiting_sources.end()) {
      ++it;
      continue;
    }
    int arrived = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    check(MPI_Improbe(it->source, large_tag, comm_, &arrived, &message, &status), "MPI_Improbe",
          it->source);
    if (!arrived) {
      waiting_sources.push_back(it->source);
      ++it;
      continue;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    const bool unlike = static_cast<std::uint64_t>(count) != it->bytes;
    if (unlike)
      log(log_level::error, "controller channel: dropping a body of ", count, " bytes from rank ",
          it->source, " announced as ", it->bytes);
    large_receive l{acquire(static_cast<std::size_t>(count)), it->source, MPI_REQUEST_NULL, unlike};
    l.body->resize(static_cast<std::size_t>(count)); // the true size of a message that is here
    check(MPI_Imrecv(l.body->data(), count, MPI_BYTE, &message, &l.request), "MPI_Imrecv",
          l.source);
    large_.push_back(std::move(l));
    it = announced_.erase(it);
  }
}

} // namespace crown::detail
