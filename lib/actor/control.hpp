// lib/actor/control.hpp — the two halves that runtime::control joins (control.cpp).
#pragma once
#include <crown/actor/controller.hpp>
#include <crown/config.hpp>
#include <cstdint>
#include <functional>
#include <mpi.h>
#include <string>

namespace crown::detail {

/// Rank 0: runs `fn` against a controller on `comm`, then stops every serving rank with
/// the resulting exit code, which it returns. `heartbeats` (one word per rank, or
/// nullptr for no watchdog) are the counters the serving ranks' heartbeat threads add to.
int run_controller(MPI_Comm comm, int size, const config& cfg, std::uint64_t* heartbeats,
                   const std::function<void(controller&)>& fn);

/// A serving rank: executes the controller's commands until its stop; returns the exit
/// code the stop carries.
int serve_actors(MPI_Comm comm, int rank, int size, bool capture_stdout);

/// The type of the exception being handled, demangled (inside a catch block).
std::string exception_type();

} // namespace crown::detail
