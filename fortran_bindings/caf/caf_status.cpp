// Image states and the progress an ending image publishes (caf_status.hpp).
#include "caf_status.hpp"
#include "transport/caf_interface.hpp"
#include <atomic>
#include <crown/crown.h>
#include <crown/runtime.hpp>
#include <cstdio>
#include <cstring>
#include <vector>

namespace crown::caf {
namespace {

/// Per image: [0] its state, [1] how many images it knows to have failed, [2] how many
/// to have ended (stopped or failed).
crown::caf_api::heap_block g_status;
constexpr std::uint64_t state_word = 0, failures_word = 8, endings_word = 16, status_bytes = 24;
/// Per world rank: how it is known here to have ended (caf_status.hpp).
std::vector<image_state> g_known;

std::uint64_t load(int rank, const crown::caf_api::heap_block& b, std::uint64_t at) {
  return crown::caf_api::remote_atomic(rank, b.offset + at, crown::caf_api::atomic_op::load, 8,
                                       false, 0, 0, b.cpu_atomics);
}
void store(int rank, const crown::caf_api::heap_block& b, std::uint64_t at, std::uint64_t value) {
  (void)crown::caf_api::remote_atomic(rank, b.offset + at, crown::caf_api::atomic_op::store, 8,
                                      false, value, 0, b.cpu_atomics);
}

/// Where a team's progress block holds counter `c` (with partner `partner` for
/// sync_images).
std::uint64_t progress_word(counter c, int partner) {
  switch (c) {
  case counter::collectives:
    return 0;
  case counter::sync_all:
    return 8;
  default:
    return 16 + static_cast<std::uint64_t>(partner) * 8;
  }
}

/// This image's own count of operations of kind `c` (with `partner`) in `t`.
std::uint64_t own_count(const team& t, counter c, int partner) {
  switch (c) {
  case counter::collectives:
    return t.collectives;
  case counter::sync_all:
    return t.syncs;
  default:
    return t.syncs_with.empty() ? 0 : t.syncs_with[static_cast<std::size_t>(partner)];
  }
}

} // namespace

void init_status(const crown::mesh& world) {
  g_status = crown::caf_api::heap_allocate(world, status_bytes, 0x63616602u, "image states");
  std::memset(crown::caf_api::heap_address(g_status.offset), 0,
              status_bytes); // cleared before the first barrier
  g_known.assign(static_cast<std::size_t>(world.size()), image_state::running);
}

void release_status() noexcept { g_status = {}; }

image_state known_state(int world_rank) noexcept {
  const auto i = static_cast<std::size_t>(world_rank);
  return i < g_known.size() ? g_known[i] : image_state::running;
}

void learn(int world_rank, image_state s) noexcept {
  const auto i = static_cast<std::size_t>(world_rank);
  if (i < g_known.size() && s != image_state::running) g_known[i] = s; // an end is final
}

image_state state_of(int world_rank) {
  return static_cast<image_state>(load(world_rank, g_status, state_word));
}

/// This image's count at `at` (failures_word or endings_word).
std::uint64_t count_seen(std::uint64_t at) noexcept {
  if (!g_status.bytes) return 0;
  // Written by ending images through the transport or by stores: read as memory (the
  // count only grows; an access racing with an image's end is not ordered with it anyway).
  auto* word = reinterpret_cast<std::uint64_t*>(crown::caf_api::heap_address(g_status.offset) + at);
  return std::atomic_ref<std::uint64_t>(*word).load(std::memory_order_acquire);
}

std::uint64_t failures_seen() noexcept { return count_seen(failures_word); }

void check_running(int world_rank, const char* what) {
  if (count_seen(endings_word) == 0 || world_rank == crown::this_runtime().rank()) return;
  const image_state s = state_of(world_rank);
  if (s == image_state::running) return;
  learn(world_rank, s);
  const std::string who = "image " + std::to_string(world_rank + 1) + " (of the initial team) has ";
  if (s == image_state::stopped) throw image_stopped(what, who + "stopped");
  throw image_failed(what, who + "failed");
}

void check_reachable(int world_rank, const char* what) {
  if (failures_seen() == 0 || world_rank == crown::this_runtime().rank()) return;
  if (state_of(world_rank) == image_state::failed) {
    learn(world_rank, image_state::failed);
    throw image_failed(what, "image " + std::to_string(world_rank + 1) +
                                 " (of the initial team) has failed");
  }
}

int reachable_rank(int image, const char* what) {
  const int rank = rank_of(image, what);
  check_reachable(rank, what);
  return rank;
}

image_state missing_part(const team& t, int image, counter c) {
  const int me = t.images.rank();
  if (image == me) return image_state::running;
  const int rank = t.images.ranks()[static_cast<std::size_t>(image)];
  const image_state s = state_of(rank);
  if (s == image_state::running) return s;
  const std::uint64_t done = load(rank, t.progress, progress_word(c, me));
  if (done >= own_count(t, c, image)) return image_state::running; // did its part first
  learn(rank, s);
  return s;
}

void check_partners(const team& t, const char* what, counter c, std::span<const int> watched) {
  // Every image that ended without its part becomes known, not only the one reported.
  int stopped = -1, failed = -1;
  const auto check = [&](int i) {
    const image_state s = missing_part(t, i, c);
    if (s == image_state::stopped && stopped < 0) stopped = i;
    if (s == image_state::failed && failed < 0) failed = i;
  };
  if (watched.empty())
    for (int i = 0; i < t.images.size(); ++i) check(i);
  for (const int i : watched) check(i);
  // STAT_STOPPED_IMAGE first: the standard gives STAT_FAILED_IMAGE only when no other
  // error condition occurs.
  if (stopped >= 0)
    throw image_stopped(what, "image " + std::to_string(stopped + 1) + " has stopped");
  if (failed >= 0) throw image_failed(what, "image " + std::to_string(failed + 1) + " has failed");
}

void enter_collective(team& t, const char* what) {
  ++t.collectives;
  check_partners(t, what, counter::collectives);
}

void end_image(image_state state) noexcept {
  if (!g_status.bytes) return;
  try {
    const int me = crown::this_runtime().rank();
    for (const team* t : member_teams()) {
      store(me, t->progress, progress_word(counter::collectives, 0), t->collectives);
      store(me, t->progress, progress_word(counter::sync_all, 0), t->syncs);
      for (std::size_t j = 0; j < t->syncs_with.size(); ++j)
        store(me, t->progress, progress_word(counter::sync_images, static_cast<int>(j)),
              t->syncs_with[j]);
    }
    // Every image learns that one more has ended (failed) with one local load.
    for (int rank = 0; rank < crown::this_runtime().world().size(); ++rank) {
      (void)crown::caf_api::remote_atomic(rank, g_status.offset + endings_word,
                                          crown::caf_api::atomic_op::add, 8, false, 1, 0,
                                          g_status.cpu_atomics);
      if (state == image_state::failed)
        (void)crown::caf_api::remote_atomic(rank, g_status.offset + failures_word,
                                            crown::caf_api::atomic_op::add, 8, false, 1, 0,
                                            g_status.cpu_atomics);
    }
    store(me, g_status, state_word, static_cast<std::uint64_t>(state)); // last: all above is seen
  } catch (const std::exception& e) { // the others would wait for this image
    std::fprintf(stderr, "crown caf: image %d cannot mark itself %s: %s\n", crown_this_image() + 1,
                 state == image_state::failed ? "failed" : "stopped", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

void wait_for_all_to_end() {
  if (!g_status.bytes) return;
  const int n = crown::this_runtime().world().size();
  crown::caf_api::backoff pause;
  for (int rank = 0; rank < n; ++rank)
    while (state_of(rank) == image_state::running) pause.pause();
}

} // namespace crown::caf
