// lib/actor/control.hpp — the two halves that runtime::control joins (control.cpp).
#pragma once
#include "mailbox.hpp"
#include <crown/actor/controller.hpp>
#include <crown/config.hpp>
#include <cstdint>
#include <functional>
#include <mpi.h>
#include <string>

namespace crown::detail {

/// Rank 0: runs `fn` against a controller on `comm` (ranks of this host reached through
/// `boxes`), then stops every serving rank with the resulting exit code, which it
/// returns. `heartbeats` (one word per rank, or nullptr for no watchdog) are the
/// counters the serving ranks' heartbeat threads add to.
int run_controller(MPI_Comm comm, const mailbox_map& boxes, int size, const config& cfg,
                   std::uint64_t* heartbeats, const std::function<void(controller&)>& fn);

/// A serving rank: executes the commands of the controller and of actors until the
/// controller's stop; returns the exit code the stop carries.
int serve_actors(MPI_Comm comm, const mailbox_map& boxes, int rank, int size, const config& cfg);

class control_core;
/// The running control session on this rank: futures, handles and ports made in it
/// check its number, and reach `core` through running_core().
struct session_scope {
  explicit session_scope(control_core& core);
  ~session_scope();
  session_scope(const session_scope&) = delete;
  session_scope& operator=(const session_scope&) = delete;
};

/// The type of the exception being handled, demangled (inside a catch block).
std::string exception_type();

} // namespace crown::detail
