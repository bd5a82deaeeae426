// fortran_bindings/caf/caf_runtime.hpp — libcrown_caf's state: Crown started on first
// use, the team stack (image numbers are relative to the current team), coarray
// tokens, and how a failure reaches the program (stat= or error termination).
#pragma once
#include "caf_abi.hpp"
#include <chrono>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <crown/sync.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crown::caf {

/// What a caf_token_t points to: a collective heap block of the team that allocated it.
struct token_data {
  detail::heap_block block;
  const descriptor* desc = nullptr; ///< an allocatable coarray's (same bounds everywhere)
  crown::mesh owner;                ///< the images that allocated it (and free it)
};

/// A team (FORM TEAM): its members in image order, its number, the team it was formed
/// in (the initial team has number -1 and no parent), and the communicator of its image
/// control statements: theirs alone, because one that meets a stopped image is left
/// pending for ever.
struct team {
  crown::mesh images;
  int number = -1;
  team* parent = nullptr;
  MPI_Comm control = MPI_COMM_NULL;
  /// SYNC IMAGES executed with each image of the team, failed ones included: a
  /// message left over from a failed one is told apart from the next one's.
  std::vector<std::uint32_t> syncs_with;
  /// SYNC ALL when every image is mapped here: a dissemination barrier over one flag
  /// word per round on every image, each SYNC ALL writing its number. `partner_flags`
  /// holds, per round, where this image writes; empty when some image is not mapped.
  detail::heap_block flags;
  std::vector<std::uint64_t*> partner_flags;
  std::uint64_t syncs = 0;
};

/// Makes `t` ready for image control statements: its control communicator (split from
/// `parent` by `number` and `key`, or a duplicate of the world's) and its barrier
/// flags. Collective over the images of `t` (of the parent for the split).
void prepare_team(team& t, const team* parent, int key);

/// An image control statement or collective met an image that has stopped
/// (STAT_STOPPED_IMAGE).
struct image_stopped : crown::state_error {
  using state_error::state_error;
};

/// Starts Crown if it has not started (gfortran registers static coarrays before it
/// calls _gfortran_caf_init).
void start(int* argc, char*** argv);
/// The current team (the initial team until CHANGE TEAM).
team& current_team();
void set_current_team(team* t);
/// Keeps a team formed by FORM TEAM until the end (team variables are never freed).
team* keep_team(team t);
const crown::mesh& images();
/// The world rank of a 1-based image of the current team.
int rank_of(int image, const char* what);
/// The same, where image 0 means this image (atomics, locks and events without a coindex).
int rank_or_self(int image, const char* what);

/// Reports a failure: into stat (as `code`) and errmsg when the program gave them,
/// else it ends the job with the message (Fortran's rule for statements without stat=).
void fail(int* stat, char* errmsg, std::size_t errmsg_len, const std::string& message, int code);

template <typename F>
void guarded(int* stat, char* errmsg, std::size_t errmsg_len, F&& f) {
  try {
    if (stat) *stat = 0;
    f();
  } catch (const image_stopped& e) {
    fail(stat, errmsg, errmsg_len, e.context() + ": " + e.message(), stat_stopped_image);
  } catch (const crown::error& e) { // "<context>: <message>": the image is named by fail
    fail(stat, errmsg, errmsg_len, e.context() + ": " + e.message(), 1);
  } catch (const std::exception& e) {
    fail(stat, errmsg, errmsg_len, e.what(), 1);
  }
}

/// Marks this image as stopped (for IMAGE_STATUS, STOPPED_IMAGES and the image control
/// statements of the others).
void mark_stopped() noexcept;
/// Whether world rank `rank` has begun a normal STOP.
bool has_stopped(int rank);
/// Throws image_stopped naming the first image of `t` that has stopped, if one has;
/// only among `watched` (0-based images of `t`) when given.
void check_running(const team& t, const char* what, std::span<const int> watched = {});
/// Polls `finished()` until it is true. When an image of `t` (of `watched`, 0-based,
/// when given) has stopped, it polls a second more, long enough for what that image
/// sent before it stopped to arrive, then throws image_stopped; whatever was pending
/// is left so.
template <typename F>
void wait_unless_stopped(const team& t, const char* what, std::span<const int> watched,
                         F&& finished) {
  detail::backoff pause;
  for (unsigned polls = 1; !finished(); ++polls) {
    if (polls % 64 == 0) { // the flags are cheap, but not free
      try {
        check_running(t, what, watched);
      } catch (const image_stopped&) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (std::chrono::steady_clock::now() < until) {
          if (finished()) return;
          pause.pause();
        }
        throw;
      }
    }
    pause.pause();
  }
}
/// SYNC ALL over `t`, returning STAT_STOPPED_IMAGE (as image_stopped) instead of waiting
/// for an image that has stopped.
void sync_team(team& t, const char* what);
/// SYNC IMAGES with `partners` (0-based images of `t`, not this one): a message to and
/// from each; image_stopped when a partner has stopped.
void sync_partners(team& t, std::span<const int> partners);
/// Normal termination: this image is stopped; it waits until every image is.
void wait_for_all_to_stop();

/// Frees what is left at the end: tokens the program never deregistered, teams.
void release_all() noexcept;
token_data* new_token(const crown::mesh& m, std::size_t bytes, bool words);
void delete_token(token_data* t);

} // namespace crown::caf
