// STOPPED_IMAGES and FAILED_IMAGES with a team argument, called the way gfortran's
// libcaf.h declares them (gfortran 11-14 refuse TEAM= when compiling, so no Fortran
// program reaches it): the images form one team numbered in reverse, the last image
// stops, the others' SYNC ALL reports it, and stopped_images names it as image n of the
// initial team and image 1 of the team, in kinds 2 and 8. Prints "PASS caf_stopped_team".
#include "caf_abi.hpp"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace crown::caf;

extern "C" {
void _gfortran_caf_init(int*, char***);
void _gfortran_caf_finalize();
int _gfortran_caf_this_image(int);
int _gfortran_caf_num_images(int, int);
void _gfortran_caf_sync_all(int*, char*, std::size_t);
void _gfortran_caf_form_team(int, void**, int);
void _gfortran_caf_stop_numeric(int, bool);
void _gfortran_caf_stopped_images(descriptor*, void*, int*);
void _gfortran_caf_failed_images(descriptor*, void*, int*);
}

namespace {

int failures = 0;
void check(bool ok, const char* what) {
  if (ok) return;
  ++failures;
  std::printf("image %d: FAILED %s\n", _gfortran_caf_this_image(0), what);
}

/// The list an inquiry returns, as 64-bit values (the memory is the caller's to free).
std::vector<std::int64_t> listed(void (*inquiry)(descriptor*, void*, int*), void* team, int kind) {
  descriptor d{};
  inquiry(&d, team, &kind);
  std::vector<std::int64_t> out;
  for (std::ptrdiff_t i = 0; i <= d.dim[0].ubound - d.dim[0].lower_bound; ++i) {
    std::int64_t v = 0;
    std::memcpy(&v, static_cast<const std::byte*>(d.base_addr) + i * kind,
                static_cast<std::size_t>(kind)); // little-endian, v was 0
    if (kind == 2) v = static_cast<std::int16_t>(v);
    out.push_back(v);
  }
  std::free(d.base_addr);
  return out;
}

} // namespace

int main(int argc, char** argv) {
  _gfortran_caf_init(&argc, &argv);
  const int me = _gfortran_caf_this_image(0), n = _gfortran_caf_num_images(0, -1);
  void* team = nullptr;
  _gfortran_caf_form_team(1, &team, n - me + 1); // image n is the team's image 1
  check(listed(_gfortran_caf_stopped_images, &team, 4).empty(), "none stopped yet");
  int st = 0;
  _gfortran_caf_sync_all(&st, nullptr, 0);
  if (n == 1) {
    std::printf("PASS caf_stopped_team\n");
    _gfortran_caf_finalize();
    return 0;
  }
  if (me == n) _gfortran_caf_stop_numeric(0, true);
  _gfortran_caf_sync_all(&st, nullptr, 0);
  check(st == stat_stopped_image, "sync all reports the stopped image");
  for (const int kind : {2, 8}) {
    check(listed(_gfortran_caf_stopped_images, nullptr, kind) == std::vector<std::int64_t>{n},
          "stopped_images() names image n");
    check(listed(_gfortran_caf_stopped_images, &team, kind) == std::vector<std::int64_t>{1},
          "stopped_images(team) names the team's image 1");
    check(listed(_gfortran_caf_failed_images, &team, kind).empty(), "failed_images(team)");
  }
  // The result is gathered on image 1 after the others are done: a SYNC ALL with the
  // stopped image reports it, so each image reports its own failures.
  if (failures == 0 && me == 1) std::printf("PASS caf_stopped_team\n");
  _gfortran_caf_finalize();
  return failures == 0 ? 0 : 1;
}
