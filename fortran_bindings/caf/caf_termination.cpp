// libcrown_caf's image termination (STOP, END PROGRAM, ERROR STOP, FAIL IMAGE) and the
// inquiries about it (IMAGE_STATUS, FAILED_IMAGES, STOPPED_IMAGES, NUM_IMAGES(FAILED=)).
//
// A failed image stays alive, idle, until every image has stopped or failed: the job goes
// on without it. Only a process that really dies ends the job (mpirun kills the others;
// Open MPI 4.1 has no ULFM to survive it).
#include "caf_abi.hpp"
#include "caf_runtime.hpp"
#include "caf_status.hpp"
#include <algorithm>
#include <crown/crown.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" void _gfortran_caf_finalize(void);

namespace {

using namespace crown::caf;

/// An INTEGER array of `kind` for FAILED_IMAGES and STOPPED_IMAGES (allocated here, as
/// gfortran expects of an allocatable function result).
void return_images(descriptor* out, const int* kind, const std::vector<int>& list) {
  const int k = kind ? *kind : 4;
  if (k != 1 && k != 2 && k != 4 && k != 8)
    throw crown::argument_error("failed_images/stopped_images", "kind " + std::to_string(k));
  const auto n = static_cast<std::ptrdiff_t>(list.size());
  out->base_addr = std::malloc(std::max<std::size_t>(list.size(), 1) * static_cast<std::size_t>(k));
  if (!out->base_addr) throw std::bad_alloc();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto v = static_cast<std::int64_t>(list[i]);
    std::memcpy(static_cast<std::byte*>(out->base_addr) + i * static_cast<std::size_t>(k), &v,
                static_cast<std::size_t>(k)); // little-endian
  }
  out->dtype = {static_cast<std::size_t>(k), 0, 1, bt_integer, 0};
  out->dim[0] = {1, 0, n - 1}; // gfortran rebases the result to lower bound 1
  out->offset = 0;
  out->span = k;
}

/// The team an inquiry names: a team variable (gfortran 11-14 refuse the argument at
/// compile time, so only a caller of the ABI passes one), else the current team.
const team& team_or_current(void* variable, const char* what) {
  return variable ? *team_of(static_cast<void**>(variable), what) : current_team();
}

/// The images (1-based) of team `t` known here to have ended as `s` (caf_status.hpp).
std::vector<int> images_known(const team& t, image_state s) {
  std::vector<int> list;
  const crown::mesh& m = t.images;
  for (int i = 0; i < m.size(); ++i)
    if (known_state(m.ranks()[static_cast<std::size_t>(i)]) == s) list.push_back(i + 1);
  return list;
}

/// STOP and ERROR STOP, with a number (`text` null) or a message (null for none).
[[noreturn]] void stop(int code, const char* text, std::size_t len, bool error, bool quiet,
                       bool numbered) {
  std::fflush(stdout);
  const char* what = error ? "ERROR STOP" : "STOP";
  if (!quiet) {
    if (text)
      std::fprintf(stderr, "%s %.*s\n", what, static_cast<int>(len), text);
    else if (numbered)
      std::fprintf(stderr, "%s %d\n", what, code);
    else if (error)
      std::fprintf(stderr, "%s\n", what);
  }
  std::fflush(stderr);
  if (error) MPI_Abort(MPI_COMM_WORLD, code ? code : 1); // every image ends
  _gfortran_caf_finalize(); // a normal stop: this image's part of finalisation
  std::exit(code);
}

/// This image has ended (`state`): it waits for the others, then leaves MPI.
void end_and_finalize(image_state state) {
  end_image(state);
  wait_for_all_to_end(); // termination synchronisation: the end of every image
  release_all();
  crown_finalize();
}

} // namespace

extern "C" {

void _gfortran_caf_finalize(void) { end_and_finalize(image_state::stopped); }

void _gfortran_caf_stop_numeric(int code, bool quiet) {
  stop(code, nullptr, 0, false, quiet, true);
}
void _gfortran_caf_stop_str(const char* text, std::size_t len, bool quiet) {
  stop(0, text, len, false, quiet, false);
}
void _gfortran_caf_error_stop(int code, bool quiet) { stop(code, nullptr, 0, true, quiet, true); }
void _gfortran_caf_error_stop_str(const char* text, std::size_t len, bool quiet) {
  stop(1, text, len, true, quiet, false);
}

/// FAIL IMAGE: this image takes no further part; the others see STAT_FAILED_IMAGE.
void _gfortran_caf_fail_image(void) {
  std::fflush(stdout);
  std::fprintf(stderr, "crown caf: image %d failed (FAIL IMAGE)\n", crown_this_image() + 1);
  std::fflush(stderr);
  end_and_finalize(image_state::failed);
  std::exit(0);
}

int _gfortran_caf_num_images(int distance, int failed) {
  const team* t = &current_team();
  for (int d = 0; d < distance && t->parent; ++d) t = t->parent;
  if (failed < 0) return t->images.size();
  // NUM_IMAGES(FAILED=.true.) counts the images known to have failed (as FAILED_IMAGES
  // lists them), .false. the others.
  const int known_failed = static_cast<int>(images_known(*t, image_state::failed).size());
  return failed == 1 ? known_failed : t->images.size() - known_failed;
}

/// IMAGE_STATUS: how the image stands now, which then becomes known here. Its team
/// argument is not read: gfortran 11-14 pass -1 for it (and refuse TEAM= when compiling).
int _gfortran_caf_image_status(int image, void* /*team*/) {
  int status = 0;
  guarded(nullptr, nullptr, 0, [&] {
    const int rank = rank_of(image, "image_status");
    const image_state s = state_of(rank);
    learn(rank, s);
    status = s == image_state::failed    ? stat_failed_image
             : s == image_state::stopped ? stat_stopped_image
                                         : 0;
  });
  return status;
}

void _gfortran_caf_failed_images(descriptor* out, void* team_variable, int* kind) {
  guarded(nullptr, nullptr, 0, [&] {
    const team& t = team_or_current(team_variable, "failed_images");
    return_images(out, kind, images_known(t, image_state::failed));
  });
}

void _gfortran_caf_stopped_images(descriptor* out, void* team_variable, int* kind) {
  guarded(nullptr, nullptr, 0, [&] {
    const team& t = team_or_current(team_variable, "stopped_images");
    return_images(out, kind, images_known(t, image_state::stopped));
  });
}

} // extern "C"
