// Controller messages over MPI point-to-point (lib/actor/channel.hpp).
#include "channel.hpp"
#include "protocol.hpp"
#include <algorithm>
#include <crown/actor/arguments.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>

namespace crown::detail {
namespace {

constexpr int small_tag = 1; ///< messages that fit a slot, and notices
constexpr int large_tag = 2; ///< bodies of larger messages, announced by a notice

void check(int rc, const char* call, int rank) {
  if (rc != MPI_SUCCESS)
    check_mpi(rc,
              std::string("controller channel: ") + call + " with rank " + std::to_string(rank));
}

/// What the pools below keep for the next command of a similar size: a payload sent
/// again and again (a broadcast each step) then needs no new pages, and none is
/// zero-filled. At most two items, the largest given; `take` hands out the smallest
/// that has room.
template <typename Item>
class keep_largest {
public:
  keep_largest() { kept_.reserve(3); } // give() then never allocates (bulk_in's destructor)
  /// The smallest kept item of at least `bytes` that `fits` accepts, if any; its size
  /// in `size` where given.
  template <typename Fits>
  std::optional<Item> take(std::size_t bytes, Fits&& fits, std::size_t* size = nullptr) {
    const std::lock_guard hold(lock_);
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->bytes >= bytes && fits(it->item) && (best == kept_.end() || it->bytes < best->bytes))
        best = it;
    if (best == kept_.end()) return std::nullopt;
    if (size) *size = best->bytes;
    std::optional<Item> item(std::move(best->item));
    kept_.erase(best);
    return item;
  }
  /// Keeps `item` (`bytes` of room) unless two larger ones are kept; the one dropped,
  /// if any, is destroyed here.
  void give(Item item, std::size_t bytes) {
    const std::lock_guard hold(lock_);
    kept_.push_back({std::move(item), bytes});
    std::sort(kept_.begin(), kept_.end(),
              [](const entry& x, const entry& y) { return x.bytes > y.bytes; });
    if (kept_.size() > 2) kept_.pop_back();
  }

private:
  struct entry {
    Item item;
    std::size_t bytes;
  };
  std::mutex lock_;
  std::vector<entry> kept_;
};

/// Blocks for attachments that arrive as plain bytes (64-byte aligned, uninitialised).
struct bulk_pool {
  struct free_aligned {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, alignment); }
  };
  using block = std::unique_ptr<std::byte[], free_aligned>;
  static constexpr std::align_val_t alignment{64}; ///< a cache line (and any arithmetic type)
  keep_largest<block> kept;
  static bulk_pool& get() {
    static bulk_pool pool;
    return pool;
  }
  /// At least `bytes` (a kept block, else a new one) and its size; null when the memory
  /// cannot be had.
  std::pair<block, std::size_t> take(std::size_t bytes) {
    std::size_t size = bytes;
    const auto any_block = [](const block&) { return true; };
    if (auto b = kept.take(bytes, any_block, &size)) return {std::move(*b), size};
    return {block(static_cast<std::byte*>(::operator new[](bytes, alignment, std::nothrow))),
            bytes};
  }
};

/// The std::vectors attachments arrive in (bulk_element_types, by code), kept for the
/// next attachment of their type.
struct vector_pool {
  keep_largest<std::any> kept;
  static vector_pool& get() {
    static vector_pool pool;
    return pool;
  }
  /// Calls f(T{}) for the element type of `code`; nothing for 0 or a code it does not
  /// know (from a newer sender: the bytes then go to plain storage).
  template <std::size_t I = 0, typename F>
  static void with_element(std::uint8_t code, F&& f) {
    if constexpr (I < std::tuple_size_v<bulk_element_types>) {
      if (code == I + 1) return f(std::tuple_element_t<I, bulk_element_types>{});
      with_element<I + 1>(code, f);
    }
  }
  template <std::size_t I = 0>
  static std::size_t capacity_bytes(const std::any& a) {
    if constexpr (I == std::tuple_size_v<bulk_element_types>) {
      return 0;
    } else {
      using T = std::tuple_element_t<I, bulk_element_types>;
      if (const auto* v = std::any_cast<std::vector<T>>(&a)) return v->capacity() * sizeof(T);
      return capacity_bytes<I + 1>(a);
    }
  }
  /// A std::vector<T> of `count` elements in `into` (the smallest kept one with room, else
  /// a new one: only what it grows by is zero-filled); its data. Throws std::bad_alloc.
  template <typename T>
  std::byte* take(std::any& into, std::size_t count) {
    if (auto v = kept.take(count * sizeof(T),
                           [](const std::any& a) { return std::any_cast<std::vector<T>>(&a); }))
      into = std::move(*v);
    if (!into.has_value()) into = std::vector<T>();
    auto& v = *std::any_cast<std::vector<T>>(&into);
    v.resize(count);
    return reinterpret_cast<std::byte*>(v.data());
  }
  void give(std::any v) {
    const std::size_t bytes = capacity_bytes(v);
    if (bytes >= attach_threshold) kept.give(std::move(v), bytes);
  }
};

/// Attachments start at multiples of this (aligned for any arithmetic type).
constexpr std::size_t bulk_alignment = 64;
std::size_t aligned(std::size_t n) {
  return (n + bulk_alignment - 1) / bulk_alignment * bulk_alignment;
}

} // namespace

bulk_in::~bulk_in() {
  for (piece& p : pieces_) {
    if (p.request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&p.request);
    MPI_Wait(&p.request, MPI_STATUS_IGNORE);
  }
  if (storage_) bulk_pool::get().kept.give(bulk_pool::block(storage_), capacity_);
  for (std::any& v : vectors_)
    if (v.has_value()) vector_pool::get().give(std::move(v));
}

arrived_attachments bulk_in::arrived() noexcept {
  const bool forwarded =
      next_forward_ == pieces_.size() && (forward_.empty() || via_->sent(forwarded_));
  return {parts_, complete() && forwarded ? std::span<std::any>(vectors_) : std::span<std::any>()};
}

void keep_arrived_vector(std::any vector) { vector_pool::get().give(std::move(vector)); }

channel::channel(MPI_Comm comm, const mailbox_map& boxes) : comm_(comm) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  if (boxes.own) {
    inbox_.emplace(boxes.own, boxes.capacity);
    local_.resize(static_cast<std::size_t>(size_));
    mpi_peers_ = false;
    for (int r = 0; r < size_; ++r) {
      if (std::byte* b = boxes.peers[static_cast<std::size_t>(r)])
        local_[static_cast<std::size_t>(r)].box.emplace(b, boxes.capacity);
      else
        mpi_peers_ = true;
    }
  }
  // Slots are posted only where some rank sends over MPI: the others use our mailbox.
  if (mpi_peers_)
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
    enqueue({b->data(), b->size(), dest, tag, b, {}});
  };
  const local_peer* const peer = mailbox_peer(dest);
  // A mailbox takes what fits half its ring (114 KiB of the default 256 KiB): a message
  // of 16-64 KiB (arguments below the attachment threshold) over MPI went as a
  // rendezvous with a kernel copy, 19 us at 16 KiB where 64 KiB attached took 13.
  if (peer && data->size() <= peer->box->max_message()) return send_local(data, dest);
  if (data->size() <= slot_bytes) return isend(data, small_tag);
  // The notice announces a body on large_tag from this rank: MPI keeps one sender's
  // messages on one tag in order, and the mailbox its notices, so the n-th notice goes
  // with the n-th body.
  message_buffer n = acquire();
  encode_notice(data->size(), *n);
  if (peer)
    send_local(n, dest);
  else
    isend(n, small_tag);
  isend(data, large_tag);
}

channel::local_peer* channel::mailbox_peer(int dest) noexcept {
  if (dest < 0 || dest >= static_cast<int>(local_.size())) return nullptr;
  local_peer& peer = local_[static_cast<std::size_t>(dest)];
  return peer.box ? &peer : nullptr;
}

void channel::send_copy(std::span<const std::byte> bytes, int dest) {
  if (local_peer* peer = mailbox_peer(dest); peer && !peer->listed &&
                                             bytes.size() <= peer->box->max_message() &&
                                             peer->box->try_send(rank_, bytes))
    return;
  message_buffer b = acquire(bytes.size());
  b->assign(bytes.begin(), bytes.end());
  send(b, dest);
}

void channel::send_local(const message_buffer& data, int dest) {
  local_peer& peer = local_[static_cast<std::size_t>(dest)];
  local_sent_.push_back(data); // copied in either way: to the pool once the caller lets go
  if (local_sent_.size() >= 1024) recycle_local_sent();
  // Those waiting go first, as far as there is room now: a caller that sends many
  // without driving progress keeps the receiver busy all the same.
  if (flush_peer(peer) && peer.box->try_send(rank_, *data)) return;
  if (!peer.listed) full_.push_back(dest);
  peer.listed = true;
  const auto bytes = static_cast<std::uint32_t>(data->size());
  const auto* size = reinterpret_cast<const std::byte*>(&bytes);
  peer.waiting.insert(peer.waiting.end(), size, size + sizeof bytes);
  peer.waiting.insert(peer.waiting.end(), data->begin(), data->end());
}

void channel::recycle_local_sent() {
  for (message_buffer& b : local_sent_) recycle(std::move(b));
  local_sent_.clear();
}

void channel::flush_local() {
  // The cost is the messages moved and the destinations looked at, not those waiting.
  std::erase_if(full_, [this](int dest) {
    local_peer& peer = local_[static_cast<std::size_t>(dest)];
    peer.listed = !flush_peer(peer);
    return !peer.listed;
  });
}

bool channel::flush_peer(local_peer& peer) {
  while (peer.first < peer.waiting.size()) {
    std::uint32_t bytes = 0;
    std::memcpy(&bytes, peer.waiting.data() + peer.first, sizeof bytes);
    const std::size_t at = peer.first + sizeof bytes;
    if (!peer.box->try_send(rank_, {peer.waiting.data() + at, bytes})) {
      if (peer.first > (64u << 10) && peer.first * 2 > peer.waiting.size()) { // sent ones go
        peer.waiting.erase(peer.waiting.begin(),
                           peer.waiting.begin() + static_cast<std::ptrdiff_t>(peer.first));
        peer.first = 0;
      }
      return false;
    }
    peer.first = at + bytes;
  }
  peer.waiting.clear();
  peer.first = 0;
  return true;
}

void channel::enqueue(outgoing o) {
  ++queued_total_;
  if (sends_.size() < sends_in_mpi && queued_.empty())
    start_send(std::move(o));
  else
    queued_.push_back(std::move(o));
}

void channel::start_send(outgoing o) {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Isend(o.data, static_cast<int>(o.bytes), MPI_BYTE, o.dest, o.tag, comm_, &r),
        "MPI_Isend", o.dest);
  sends_.push_back({r, std::move(o)});
}

int channel::next_bulk_tag() noexcept {
  next_bulk_tag_ = (next_bulk_tag_ + 1) % bulk_tags;
  return bulk_tag_first + next_bulk_tag_;
}

std::uint64_t channel::send_bulk(std::span<const std::span<const std::byte>> parts,
                                 std::size_t piece_bytes, int dest, int tag,
                                 const std::shared_ptr<const void>& keep) {
  for (const auto part : parts)
    for (std::size_t at = 0; at < part.size(); at += piece_bytes)
      enqueue({part.data() + at, std::min(piece_bytes, part.size() - at), dest, tag, {}, keep});
  return queued_total_;
}

std::shared_ptr<bulk_in> channel::receive_bulk(int source, int tag,
                                               std::span<const std::uint64_t> sizes,
                                               std::size_t piece_bytes, std::vector<int> forward,
                                               int forward_tag,
                                               std::span<const std::uint8_t> elements) {
  auto b = std::make_shared<bulk_in>();
  b->source_ = source;
  b->tag_ = tag;
  b->forward_ = std::move(forward);
  b->forward_tag_ = forward_tag;
  b->via_ = this;
  // Each part into a vector of its element type, else into one pooled block.
  b->vectors_.resize(sizes.size());
  std::vector<std::byte*> at(sizes.size());
  std::size_t total = 0;
  b->stored_ = true;
  for (std::size_t part = 0; part < sizes.size(); ++part) {
    const std::uint8_t code = part < elements.size() ? elements[part] : 0;
    const auto land = [&](auto element) {
      using T = decltype(element);
      if (sizes[part] % sizeof(T) == 0) // else not its type's: bytes alone
        at[part] = vector_pool::get().take<T>(b->vectors_[part], sizes[part] / sizeof(T));
    };
    try {
      vector_pool::with_element(code, land);
    } catch (const std::exception&) { // std::bad_alloc, std::length_error
      b->stored_ = false;
    }
    if (!at[part]) total += aligned(sizes[part]);
  }
  if (b->stored_ && total > 0) {
    auto [block, size] = bulk_pool::get().take(total);
    b->storage_ = block.release();
    b->capacity_ = size;
    b->stored_ = b->storage_ != nullptr;
  }
  if (!b->stored_) {
    int me = -1;
    MPI_Comm_rank(comm_, &me);
    b->failure_ = "rank " + std::to_string(me) + " has no memory for " +
                  std::to_string(std::accumulate(sizes.begin(), sizes.end(), std::uint64_t{0})) +
                  " bytes of arguments";
  }
  std::size_t offset = 0;
  for (std::size_t part = 0; part < sizes.size(); ++part) {
    const std::size_t bytes = sizes[part];
    if (!at[part] && b->storage_) {
      at[part] = b->storage_ + offset;
      offset += aligned(bytes);
    }
    if (b->stored_) b->parts_.emplace_back(at[part], bytes);
    for (std::size_t from = 0; from < bytes; from += piece_bytes)
      b->pieces_.push_back(
          {b->stored_ ? at[part] + from : nullptr, std::min(piece_bytes, bytes - from)});
  }
  b->outstanding_ = b->pieces_.size();
  arriving_.push_back(b);
  test_bulk(b); // what is here already
  return b;
}

void channel::progress_bulk() {
  std::erase_if(arriving_, [this](const std::weak_ptr<bulk_in>& w) {
    const auto b = w.lock();
    if (!b) return true;
    test_bulk(b);
    return b->complete();
  });
}

void channel::test_bulk(const std::shared_ptr<bulk_in>& held) {
  bulk_in& b = *held;
  // Pieces are matched as they arrive, in order (MPI keeps one sender's messages on one
  // tag in order), by probe: a piece of another size than announced is then received
  // whole into a buffer of its own and dropped (a receive posted too short ends in
  // MPI_ERR_TRUNCATE, and Open MPI was seen to write past its end). Without storage,
  // pieces are received that way one at a time, so the sender is not left waiting and
  // no more than a piece of memory is used.
  while (b.next_post_ < b.pieces_.size() && (b.stored_ || b.spilling_ == 0)) {
    int arrived = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status{};
    check(MPI_Improbe(b.source_, b.tag_, comm_, &arrived, &message, &status), "MPI_Improbe",
          b.source_);
    if (!arrived) break;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    const std::size_t i = b.next_post_++;
    bulk_in::piece& p = b.pieces_[i];
    p.whole = p.at && static_cast<std::size_t>(count) == p.bytes;
    std::byte* to = p.at;
    if (!p.whole) {
      if (b.failure_.empty())
        b.failure_ = "piece " + std::to_string(i) + " of its arguments from rank " +
                     std::to_string(b.source_) + " held " + std::to_string(count) +
                     " bytes where the command announced " + std::to_string(p.bytes);
      p.spill.resize(static_cast<std::size_t>(count));
      to = p.spill.data();
      ++b.spilling_;
    }
    check(MPI_Imrecv(to, count, MPI_BYTE, &message, &p.request), "MPI_Imrecv", b.source_);
  }
  for (std::size_t i = b.next_forward_; i < b.next_post_; ++i) {
    bulk_in::piece& p = b.pieces_[i];
    if (p.request == MPI_REQUEST_NULL) continue;
    int done = 0;
    check(MPI_Test(&p.request, &done, MPI_STATUS_IGNORE), "MPI_Test", b.source_);
    if (!done) continue;
    --b.outstanding_;
    if (!p.whole) {
      std::vector<std::byte>().swap(p.spill);
      --b.spilling_;
    }
  }
  // Pieces go on in their order (a small last piece may arrive first): each as soon as
  // it and those before it are here. The send holds the storage; a piece that failed
  // goes on empty, so the ranks below fail too and nobody waits for it.
  for (; b.next_forward_ < b.next_post_; ++b.next_forward_) {
    const bulk_in::piece& p = b.pieces_[b.next_forward_];
    if (p.request != MPI_REQUEST_NULL) break;
    for (const int dest : b.forward_) {
      enqueue({p.whole ? p.at : nullptr, p.whole ? p.bytes : 0, dest, b.forward_tag_, {}, held});
      b.forwarded_ = queued_total_;
    }
  }
}

void channel::poll_sends() {
  if (!full_.empty()) flush_local();
  recycle_local_sent();
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
    recycle(std::move(sends_.front().what.buffer));
    sends_.pop_front();
    ++retired_;
  }
  while (!queued_.empty() && sends_.size() < sends_in_mpi) { // in order: MPI keeps it
    start_send(std::move(queued_.front()));
    queued_.pop_front();
  }
}

void channel::keep_mpi_moving() {
  if (mpi_peers_ || !sends_.empty()) return; // the slots' or the sends' tests call MPI
  int flag = 0;
  check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe", -1);
}

void channel::drain_sends(std::chrono::duration<double> patience) {
  backoff pause(wait_site{"sending the last controller messages"});
  const auto waiting = [this] {
    std::size_t bytes = 0;
    for (const int dest : full_) {
      const local_peer& peer = local_[static_cast<std::size_t>(dest)];
      bytes += peer.waiting.size() - peer.first;
    }
    return bytes;
  };
  std::size_t last = waiting();
  auto moved = std::chrono::steady_clock::now();
  for (poll_sends(); !sends_.empty() || !queued_.empty() || !full_.empty(); poll_sends()) {
    pause.pause();
    if (full_.empty()) continue;
    const auto now = std::chrono::steady_clock::now();
    if (const std::size_t left = waiting(); left != last) {
      last = left;
      moved = now;
    } else if (now - moved > patience) {
      for (const int dest : full_) {
        local_peer& peer = local_[static_cast<std::size_t>(dest)];
        log(log_level::error, "controller channel: rank ", rank_, " dropped ",
            peer.waiting.size() - peer.first, " bytes of messages to rank ", dest,
            ", whose mailbox took none for ", patience.count(),
            " s while this rank left the control session");
        peer.waiting.clear();
        peer.first = 0;
        peer.listed = false;
      }
      full_.clear();
    }
  }
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
    message_buffer bytes;
    int source = -1;
    if (!next_small(bytes, source)) return false;
    const auto announced_bytes = notice_bytes(*bytes, slot_bytes);
    if (!announced_bytes) {
      m.owned = std::move(bytes);
      m.bytes = *m.owned;
      m.source = source;
      return true;
    }
    recycle(std::move(bytes));
    if (*announced_bytes == 0) {
      log(log_level::error, "controller channel: dropped a notice of an impossible size from rank ",
          source);
      continue;
    }
    announced_.push_back({source, *announced_bytes}); // the body may be there already
  }
}

bool channel::next_small(message_buffer& bytes, int& source) {
  if (slots_first_ && take_from_slots(bytes, source)) {
    slots_first_ = false;
    return true;
  }
  if (take_from_mailbox(bytes, source)) {
    slots_first_ = mpi_peers_;
    return true;
  }
  return !slots_first_ && take_from_slots(bytes, source);
}

bool channel::take_from_mailbox(message_buffer& bytes, int& source) {
  if (!inbox_) return false;
  for (;;) {
    const bool any = inbox_->receive([&](int from, std::size_t size) -> std::byte* {
      source = from;
      if (from >= size_) return nullptr; // dropped below; its cells are freed all the same
      bytes = acquire(size);
      bytes->resize(size);
      return bytes->data();
    });
    if (!any) return false;
    if (bytes) return true;
    log(log_level::error, "controller channel: dropped a mailbox message from rank ", source,
        ", which is not in the session (", size_, " ranks)");
  }
}

bool channel::take_from_slots(message_buffer& bytes, int& source) {
  if (!mpi_peers_) return false;
  slot& s = ring_[head_];
  if (!s.arrived) {
    repost();
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
  int count = 0;
  MPI_Get_count(&s.status, MPI_BYTE, &count);
  // The message gets a pooled buffer of its own (a copy of its bytes only) and the
  // slot is posted again before MPI is next asked (repost()): a message outlives later
  // receives (a command's endpoint may wait in get() and receive more), and no slot is
  // held for long.
  bytes = acquire(static_cast<std::size_t>(count));
  bytes->assign(s.bytes.begin(), s.bytes.begin() + count);
  source = s.status.MPI_SOURCE;
  ++unposted_;
  head_ = (head_ + 1) % slots;
  return true;
}

void channel::repost() {
  // The slots consumed since the last test, which precede the head in ring order, are
  // posted in that order (so that arrived slots still follow the head). Done here, not
  // on receipt, the MPI_Irecv is off the path from a message to its answer.
  for (; unposted_ > 0; --unposted_) post(ring_[(head_ + slots - unposted_) % slots]);
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
