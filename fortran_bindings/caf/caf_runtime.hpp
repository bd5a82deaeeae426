// fortran_bindings/caf/caf_runtime.hpp — libcrown_caf's state: Crown started on first
// use, the team stack (image numbers are relative to the current team), coarray
// tokens, and how a failure reaches the program (stat= or error termination).
#pragma once
#include "caf_abi.hpp"
#include "transport/caf_interface.hpp"
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <crown/sync.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace crown::caf {

/// What a caf_token_t points to: a collective heap block of the team that allocated a
/// coarray, or (`component`) an allocatable component of a coarray: this image's own
/// allocation in its heap (`block.bytes` 0 while unallocated), which other images find
/// through the component's descriptor or pointer in the coarray.
struct token_data {
  crown::caf_api::heap_block block;
  const descriptor* desc = nullptr; ///< an allocatable coarray's (same bounds everywhere)
  std::optional<crown::mesh> owner; ///< the images that allocated it (and free it)
  bool component = false;
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
  crown::caf_api::heap_block flags;
  std::vector<std::uint64_t*> partner_flags;
  std::uint64_t syncs = 0;
  /// SYNC IMAGES when every image is mapped here: word j of this image's block holds
  /// syncs_with[me] of image j (the SYNC IMAGES it made with this one), and
  /// `pair_words[j]` is where this image writes it in image j's block. Empty when some
  /// image is not mapped (messages over `control` instead).
  crown::caf_api::heap_block pairs;
  std::vector<std::uint64_t*> pair_words;
  /// Collectives (co_*, FORM TEAM, coarray allocation) this image entered in the team.
  std::uint64_t collectives = 0;
  /// What this image publishes when it ends (caf_status.hpp): collectives, SYNC ALLs,
  /// then SYNC IMAGES with each image, one word each.
  crown::caf_api::heap_block progress;

  team(crown::mesh m, int n, team* p) : images(std::move(m)), number(n), parent(p) {}
};

/// Makes `t` ready for image control statements: its control communicator (split from
/// `parent` by `number` and `key`, or a duplicate of the world's), its barrier flags and
/// its progress words. Collective over the images of `t` (of the parent for the split).
void prepare_team(team& t, const team* parent, int key);

/// An image control statement, collective or access met an image that has stopped
/// (STAT_STOPPED_IMAGE) or failed (STAT_FAILED_IMAGE).
struct image_stopped : crown::state_error {
  using state_error::state_error;
};
struct image_failed : crown::state_error {
  using state_error::state_error;
};

/// Ends the program, naming the compiler, when it was built by a gfortran whose coarray
/// interface libcrown_caf does not implement (15 and later; caf_version.cpp).
void check_compiler();
/// Starts Crown if it has not started (gfortran registers static coarrays before it
/// calls _gfortran_caf_init).
void start(int* argc, char*** argv);
/// The current team (the initial team until CHANGE TEAM).
team& current_team();
void set_current_team(team* t);
/// The team a team variable holds (set by FORM TEAM; else a state_error for `what`).
team* team_of(void** variable, const char* what);
/// Keeps a team formed by FORM TEAM until the end (team variables are never freed).
team* keep_team(std::unique_ptr<team> t);
/// The initial team and every team this image formed.
std::vector<const team*> member_teams();
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
  } catch (const image_failed& e) {
    fail(stat, errmsg, errmsg_len, e.context() + ": " + e.message(), stat_failed_image);
  } catch (const crown::error& e) { // "<context>: <message>": the image is named by fail
    fail(stat, errmsg, errmsg_len, e.context() + ": " + e.message(), 1);
  } catch (const std::exception& e) {
    fail(stat, errmsg, errmsg_len, e.what(), 1);
  }
}

/// Frees what is left at the end: tokens the program never deregistered, teams.
void release_all() noexcept;
token_data* new_token(const crown::mesh& m, std::size_t bytes, bool words);
void delete_token(token_data* t);
/// A token for an allocatable component (no memory yet; not collective).
token_data* new_component_token();
/// Whether `p` is a live component token of this image.
bool is_component_token(const void* p) noexcept;
/// Gives a component `bytes` of this image's heap (freeing what it had); its address.
/// The size is kept just before the data, where other images read it (component_size).
void* allocate_component(token_data& t, std::size_t bytes);
/// The size of the component data at `address` (an address of that image) on `world_rank`.
std::size_t component_size(int world_rank, std::uintptr_t address);
void free_component(token_data& t) noexcept;
void delete_component_token(token_data* t) noexcept;
/// The offset in `world_rank`'s heap of [address, address + bytes), an address in that
/// image's own address space (a component's data, found in its descriptor); -1 when
/// the range is not in its heap.
std::int64_t peer_heap_offset(int world_rank, std::uintptr_t address, std::size_t bytes);

} // namespace crown::caf
