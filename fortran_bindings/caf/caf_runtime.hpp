// fortran_bindings/caf/caf_runtime.hpp — libcrown_caf's state: Crown started on first
// use, the team stack (image numbers are relative to the current team), coarray
// tokens, and how a failure reaches the program (stat= or error termination).
#pragma once
#include <crown/detail/heap.hpp>
#include <crown/error.hpp>
#include <crown/mesh.hpp>
#include <crown/sync.hpp>
#include <string>

namespace crown::caf {

struct descriptor;

/// What a caf_token_t points to: a collective heap block of the team that allocated it.
struct token_data {
  detail::heap_block block;
  const descriptor* desc = nullptr; ///< an allocatable coarray's (same bounds everywhere)
  crown::mesh owner;                ///< the images that allocated it (and free it)
};

/// A team (FORM TEAM): its members in image order, its number, and the team it was
/// formed in. The initial team has number -1 and no parent.
struct team {
  crown::mesh images;
  int number = -1;
  team* parent = nullptr;
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

/// Reports a failure: into stat/errmsg when the program gave them, else it ends the
/// job with the message (Fortran's rule for statements without stat=).
void fail(int* stat, char* errmsg, std::size_t errmsg_len, const std::string& message);

template <typename F>
void guarded(int* stat, char* errmsg, std::size_t errmsg_len, F&& f) {
  try {
    if (stat) *stat = 0;
    f();
  } catch (const std::exception& e) {
    fail(stat, errmsg, errmsg_len, e.what());
  }
}

/// Marks this image as stopped (for IMAGE_STATUS and STOPPED_IMAGES on the others).
void mark_stopped() noexcept;
/// Whether world rank `rank` has begun a normal STOP.
bool has_stopped(int rank);

/// Frees what is left at the end: tokens the program never deregistered, teams.
void release_all() noexcept;
token_data* new_token(const crown::mesh& m, std::size_t bytes, bool words);
void delete_token(token_data* t);

} // namespace crown::caf
