// Staged transfers: the origin's pipeline of chunks through page-locked slots, and the
// owner's server for its device heap.
#include "staged_transfer.hpp"
#include <algorithm>
#include <atomic>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <mutex>
#include <optional>
#include <string>

namespace crown::detail {

std::vector<staging_chunk> plan_staging(std::span<const run> runs, std::size_t chunk_bytes) {
  if (chunk_bytes == 0) throw argument_error("plan_staging", "chunks of 0 bytes");
  std::vector<staging_chunk> chunks;
  std::size_t packed = 0;
  for (const run& r : runs)
    for (std::size_t done = 0; done < r.bytes;) {
      if (chunks.empty() || chunks.back().bytes == chunk_bytes) chunks.push_back({packed, 0, {}});
      staging_chunk& c = chunks.back();
      const std::size_t take = std::min(r.bytes - done, chunk_bytes - c.bytes);
      c.runs.push_back({r.offset + done, take});
      c.bytes += take;
      done += take;
      packed += take;
    }
  return chunks;
}

namespace {

/// The slots' copies started and not yet finished; finished (errors ignored) when a
/// transfer ends early, so that no copy still writes a slot or the caller's buffer.
class slot_copies {
public:
  slot_copies(const staging& how) : how_(how), busy_(how.slots.size(), 0) {}
  ~slot_copies() {
    for (std::size_t s = 0; s < busy_.size(); ++s)
      if (busy_[s]) try {
          how_.finish(how_.slots[s]);
        } catch (...) { // the transfer's own error is the one that propagates
        }
  }
  slot_copies(const slot_copies&) = delete;
  slot_copies& operator=(const slot_copies&) = delete;
  void fill(std::size_t s, const staging_chunk& c) {
    how_.fill(how_.slots[s], c.packed_offset, c.bytes);
    busy_[s] = 1;
  }
  void drain(std::size_t s, const staging_chunk& c) {
    how_.drain(how_.slots[s], c.packed_offset, c.bytes);
    busy_[s] = 1;
  }
  void finish(std::size_t s) {
    if (!busy_[s]) return;
    busy_[s] = 0;
    how_.finish(how_.slots[s]);
  }

private:
  const staging& how_;
  std::vector<char> busy_;
};

async_handle request(active_messages& am, bool put, int rank, const staging_chunk& c,
                     std::byte* from) {
  return am.start_buffer(put, rank, device_heap_buffer, 0, c.runs, from);
}

} // namespace

void staged_transfer(active_messages& am, bool put, int rank, std::span<const run> runs,
                     std::byte* packed, const staging& how) {
  const char* what = put ? "staged device put" : "staged device get";
  if (how.slots.empty()) { // host memory: straight from and into it, requests in flight together
    std::vector<async_handle> flying;
    for (const staging_chunk& c : plan_staging(runs, staged_request_bytes))
      flying.push_back(request(am, put, rank, c, packed + c.packed_offset));
    return wait_remote(flying);
  }
  if (how.slots.size() < 2 || how.slot_bytes == 0 || how.slot_bytes > staged_request_bytes)
    throw argument_error(what, "a pipeline needs at least two staging slots of 1 to " +
                                   std::to_string(staged_request_bytes) + " bytes");
  const auto chunks = plan_staging(runs, how.slot_bytes);
  const std::size_t n = chunks.size(), slots = how.slots.size();
  std::vector<async_handle> flying(slots);
  slot_copies copies(how);
  const auto slot_of = [&](std::size_t k) { return k % slots; };
  if (put) {
    const auto fill = [&](std::size_t k) {
      if (async_handle& before = flying[slot_of(k)]) { // the slot's previous chunk has left
        wait_remote(*before, what);
        before = {};
      }
      copies.fill(slot_of(k), chunks[k]);
    };
    if (n) fill(0);
    for (std::size_t k = 0; k < n; ++k) {
      copies.finish(slot_of(k));
      flying[slot_of(k)] = request(am, true, rank, chunks[k], how.slots[slot_of(k)]);
      if (k + 1 < n) fill(k + 1); // copied while chunk k is on the wire
    }
    std::erase_if(flying, [](const async_handle& h) { return !h; }); // slots never used
    return wait_remote(flying);
  }
  const auto ask = [&](std::size_t k) {
    flying[slot_of(k)] = request(am, false, rank, chunks[k], how.slots[slot_of(k)]);
  };
  for (std::size_t k = 0; k < std::min(n, slots); ++k) ask(k);
  for (std::size_t k = 0; k < n; ++k) {
    wait_remote(*flying[slot_of(k)], what);
    flying[slot_of(k)] = {};
    copies.drain(slot_of(k), chunks[k]);
    // The previous chunk's copy out had a chunk's flight to finish: its slot asks next.
    if (k >= 1 && k - 1 + slots < n) {
      copies.finish(slot_of(k - 1));
      ask(k - 1 + slots);
    }
  }
  for (std::size_t s = 0; s < slots; ++s) copies.finish(s);
}

namespace {
std::mutex g_server_mutex; ///< held while the server runs: removing it waits for that
device_server g_server;
std::atomic<bool> g_serving{false};
} // namespace

void set_device_server(device_server server) {
  const std::lock_guard lock(g_server_mutex);
  g_server = std::move(server);
  g_serving = static_cast<bool>(g_server);
}

bool device_requests_served() noexcept { return g_serving.load(std::memory_order_relaxed); }

am_status serve_device_request(bool put, std::span<const run> runs,
                               const std::function<void(std::byte* host)>& network) {
  const std::lock_guard lock(g_server_mutex);
  return g_server ? g_server(put, runs, network) : am_status::no_device_heap;
}

} // namespace crown::detail
