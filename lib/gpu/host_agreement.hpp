// lib/gpu/host_agreement.hpp — one step of a collective set-up that can fail on some
// ranks only: every rank learns the first failure.
#pragma once
#include <mpi.h>
#include <string>

namespace crown::detail {

/// Collective over `comm`: empty when `problem` is empty on every rank, else the
/// lowest failing rank's problem prefixed with "<who> R: " (R in `comm`'s numbering).
std::string first_problem(MPI_Comm comm, const std::string& problem, const char* who = "rank");

} // namespace crown::detail
