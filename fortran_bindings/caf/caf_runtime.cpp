// libcrown_caf's state: start-up, teams, tokens, failure reporting, stopped images.
#include "caf_runtime.hpp"
#include <algorithm>
#include <atomic>
#include <crown/crown.h>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/runtime.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

namespace crown::caf {
namespace {

std::unique_ptr<team> g_initial;
std::vector<std::unique_ptr<team>> g_formed;
team* g_current = nullptr;
/// Every registered coarray (freed at the end if the program did not: static coarrays
/// never are).
std::set<token_data*> g_tokens;
/// Buffers of sends to images that stopped, which MPI may still read.
std::vector<std::unique_ptr<std::uint32_t[]>> g_abandoned;
/// One word per image, set when that image begins a normal STOP.
detail::heap_block g_stopped;

/// An image that leaves by exit() (a libgfortran runtime error, CALL EXIT) and not by
/// STOP, END or ERROR STOP would leave the others waiting for it: end the job.
void exit_without_stop() {
  if (!g_initial) return;
  std::fflush(stdout);
  std::fprintf(stderr,
               "ERROR STOP crown caf: image %d ended without STOP or END PROGRAM (a runtime "
               "error?); ending every image\n",
               crown_this_image() + 1);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

} // namespace

void start(int* argc, char*** argv) {
  if (g_initial) return;
  if (!crown_initialized() && crown_init(argc, argv) != CROWN_OK) {
    std::fprintf(stderr, "crown caf: %s\n", crown_last_error());
    std::exit(1);
  }
  const crown::mesh& world = crown::this_runtime().world();
  g_stopped = detail::heap_allocate(world, sizeof(std::int64_t), 0x63616602u, "stop flags");
  std::memset(detail::heap_address(g_stopped.offset), 0, sizeof(std::int64_t));
  g_initial = std::make_unique<team>(team{world, -1, nullptr, MPI_COMM_NULL, {}, {}, {}, 0});
  prepare_team(*g_initial, nullptr, 0); // its closing barrier: every stop flag is clear too
  g_current = g_initial.get();
  std::atexit(exit_without_stop);
}

team& current_team() {
  start(nullptr, nullptr);
  return *g_current;
}
void set_current_team(team* t) { g_current = t; }

team* keep_team(team t) {
  g_formed.push_back(std::make_unique<team>(std::move(t)));
  return g_formed.back().get();
}

const crown::mesh& images() { return current_team().images; }

int rank_of(int image, const char* what) {
  const crown::mesh& m = images();
  if (image < 1 || image > m.size())
    throw crown::argument_error(what, "image " + std::to_string(image) +
                                          " out of range 1:" + std::to_string(m.size()));
  return m.ranks()[static_cast<std::size_t>(image - 1)];
}

int rank_or_self(int image, const char* what) {
  return image == 0 ? crown::this_runtime().rank() : rank_of(image, what);
}

void fail(int* stat, char* errmsg, std::size_t errmsg_len, const std::string& message, int code) {
  if (stat) {
    *stat = code;
    if (errmsg && errmsg_len) {
      const std::size_t n = std::min(errmsg_len, message.size());
      std::memcpy(errmsg, message.data(), n);
      std::memset(errmsg + n, ' ', errmsg_len - n); // Fortran strings are blank-padded
    }
    return;
  }
  std::fprintf(stderr, "ERROR STOP crown caf: image %d: %s\n", crown_this_image() + 1,
               message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void mark_stopped() noexcept {
  if (!g_initial) return;
  try {
    (void)detail::remote_atomic(crown::this_runtime().rank(), g_stopped.offset,
                                detail::atomic_op::store, 8, false, 1, 0, g_stopped.cpu_atomics);
  } catch (const std::exception& e) { // the others would wait for this image
    std::fprintf(stderr, "crown caf: image %d cannot mark itself stopped: %s\n",
                 crown_this_image() + 1, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

bool has_stopped(int rank) {
  start(nullptr, nullptr);
  return detail::remote_atomic(rank, g_stopped.offset, detail::atomic_op::load, 8, false, 0, 0,
                               g_stopped.cpu_atomics) != 0;
}

void check_running(const team& t, const char* what, std::span<const int> watched) {
  const auto& ranks = t.images.ranks();
  const auto check = [&](std::size_t i) {
    if (has_stopped(ranks[i]))
      throw image_stopped(what, "image " + std::to_string(i + 1) + " has stopped");
  };
  if (watched.empty())
    for (std::size_t i = 0; i < ranks.size(); ++i) check(i);
  for (const int i : watched) check(static_cast<std::size_t>(i));
}

void prepare_team(team& t, const team* parent, int key) {
  if (parent)
    crown::check_mpi(MPI_Comm_split(parent->control, t.number, key, &t.control),
                     "form team: MPI_Comm_split");
  else
    crown::check_mpi(MPI_Comm_dup(t.images.comm(), &t.control), "caf: MPI_Comm_dup");
  const int n = t.images.size(), me = t.images.rank();
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  t.flags = detail::heap_allocate(t.images, static_cast<std::size_t>(std::max(rounds, 1)) * 8,
                                  0x63616604u, "sync all flags");
  std::memset(detail::heap_address(t.flags.offset), 0,
              static_cast<std::size_t>(std::max(rounds, 1)) * 8);
  int mapped = 1;
  for (int r = 0; r < rounds && mapped; ++r) {
    const int partner = t.images.ranks()[static_cast<std::size_t>((me + (1 << r)) % n)];
    auto* word = reinterpret_cast<std::uint64_t*>(
        detail::heap_peer_address(partner, t.flags.offset + static_cast<std::uint64_t>(r) * 8));
    mapped = word != nullptr;
    t.partner_flags.push_back(word);
  }
  // Every image must choose the same barrier: flags only if all partners of all images
  // are mapped (hosts of unequal size map some and not others).
  crown::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_LAND, t.control),
                   "caf: MPI_Allreduce");
  if (!mapped) t.partner_flags.clear();
  crown::sync_all(t.images); // the flags are clear before anyone writes them
}

void sync_team(team& t, const char* what) {
  detail::heap_quiet();
  if (!t.partner_flags.empty() || t.images.size() == 1) {
    const std::uint64_t sync = ++t.syncs;
    auto* mine = reinterpret_cast<std::uint64_t*>(detail::heap_address(t.flags.offset));
    for (std::size_t r = 0; r < t.partner_flags.size(); ++r) {
      std::atomic_ref<std::uint64_t>(*t.partner_flags[r]).store(sync, std::memory_order_release);
      wait_unless_stopped(t, what, {}, [&] {
        return std::atomic_ref<std::uint64_t>(mine[r]).load(std::memory_order_acquire) >= sync;
      });
    }
    detail::heap_sync_local();
    return;
  }
  MPI_Request barrier;
  crown::check_mpi(MPI_Ibarrier(t.control, &barrier), what);
  wait_unless_stopped(t, what, {}, [&] {
    int done = 0;
    crown::check_mpi(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE), what);
    return done != 0;
  });
  detail::heap_sync_local();
}

void sync_partners(team& t, std::span<const int> partners) {
  constexpr int tag = 7101;
  const std::size_t n = partners.size();
  if (t.syncs_with.empty()) t.syncs_with.assign(static_cast<std::size_t>(t.images.size()), 0);
  detail::heap_quiet();
  // Sent values live on the heap: a send to an image that has stopped is never
  // completed, and its buffer must outlive this call (kept in g_abandoned then).
  auto owned = std::make_unique<std::uint32_t[]>(n);
  std::uint32_t* sent = owned.get();
  std::vector<std::uint32_t> got(n);
  std::vector<MPI_Request> sends(n), receives(n);
  std::vector<bool> done(n, false);
  const auto post_receive = [&](std::size_t i) {
    crown::check_mpi(MPI_Irecv(&got[i], 1, MPI_UINT32_T, partners[i], tag, t.control, &receives[i]),
                     "sync images: MPI_Irecv");
  };
  for (std::size_t i = 0; i < n; ++i) {
    sent[i] = ++t.syncs_with[static_cast<std::size_t>(partners[i])];
    crown::check_mpi(MPI_Isend(&sent[i], 1, MPI_UINT32_T, partners[i], tag, t.control, &sends[i]),
                     "sync images: MPI_Isend");
    post_receive(i);
  }
  std::size_t left = n;
  try {
    wait_unless_stopped(t, "sync images", partners, [&] {
      for (std::size_t i = 0; i < n; ++i) {
        int arrived = 0;
        if (done[i]) continue;
        crown::check_mpi(MPI_Test(&receives[i], &arrived, MPI_STATUS_IGNORE), "sync images");
        if (!arrived) continue;
        if (got[i] == sent[i]) {
          done[i] = true;
          --left;
        } else {
          post_receive(i); // from an earlier SYNC IMAGES that failed
        }
      }
      return left == 0;
    });
    crown::check_mpi(MPI_Waitall(static_cast<int>(n), sends.data(), MPI_STATUSES_IGNORE),
                     "sync images: MPI_Waitall");
  } catch (...) { // image_stopped, or an MPI error: nothing posted may outlive this
    for (std::size_t i = 0; i < n; ++i) {
      if (!done[i]) {
        MPI_Cancel(&receives[i]);
        MPI_Wait(&receives[i], MPI_STATUS_IGNORE); // got[] dies with this call
      }
      if (sends[i] != MPI_REQUEST_NULL) MPI_Request_free(&sends[i]);
    }
    g_abandoned.push_back(std::move(owned)); // sends to a stopped image may never complete
    throw;
  }
  detail::heap_sync_local();
}

void wait_for_all_to_stop() {
  if (!g_initial) return;
  mark_stopped();
  const auto& ranks = g_initial->images.ranks();
  detail::backoff pause;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    while (!has_stopped(ranks[i])) pause.pause();
}

token_data* new_token(const crown::mesh& m, std::size_t bytes, bool words) {
  auto* t = new token_data{
      detail::heap_allocate(m, bytes, 0x63616600u + (words ? 1 : 0), "coarray"), nullptr, m};
  g_tokens.insert(t);
  return t;
}

void delete_token(token_data* t) {
  detail::heap_release(t->owner, t->block);
  g_tokens.erase(t);
  delete t;
}

void release_all() noexcept {
  for (token_data* t : g_tokens) delete t; // their memory goes with the heap
  g_tokens.clear();
  g_formed.clear();
  g_current = nullptr;
  g_initial.reset();
}

} // namespace crown::caf
