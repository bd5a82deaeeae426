// fortran_bindings/caf/caf_sync.hpp — SYNC ALL and SYNC IMAGES over a team, which end
// with STAT_STOPPED_IMAGE or STAT_FAILED_IMAGE (as image_stopped or image_failed) instead
// of waiting for an image that ended before its part. With a failed image the others
// still synchronise among themselves before they report it.
#pragma once
#include "caf_runtime.hpp"
#include <span>

namespace crown::caf {

/// SYNC ALL over `t`.
void sync_team(team& t, const char* what);
/// SYNC IMAGES with `partners` (0-based images of `t`, not this one): a message to and
/// from each.
void sync_partners(team& t, std::span<const int> partners);

} // namespace crown::caf
