// lib/mesh/crown_comm.hpp — the communicator Crown's own traffic on a mesh uses.
#pragma once
#include <crown/mesh.hpp>
#include <mpi.h>

namespace crown::detail {

/// Crown's private duplicate of m.comm(): the same members in the same order,
/// MPI_ERRORS_RETURN, made together with m.comm() (collective over the members the
/// first time either is needed) and never handed to users. Every barrier, collective
/// and message Crown itself exchanges on a mesh goes here, so a user's MPI_ANY_TAG
/// receive or own collective on m.comm() never meets Crown's. Throws like m.comm()
/// (runtime gone, caller not a member).
MPI_Comm crown_comm(const mesh& m);

/// A barrier on crown_comm(m) that serves one-sided requests while it waits (Crown's
/// internal counterpart of m.barrier()).
void crown_barrier(const mesh& m);

/// A nonblocking collective of Crown's that starts a second collective on the same
/// private communicator once its first one completes (co_sum_async of floating-point
/// data: an all-to-all, the fold, an all-gather). Members must start collectives on a
/// communicator in one order, and when the second stage starts depends on when each
/// member tests. So the second stage is deferred here and started at a point that is
/// the same on every member: when the operation is tested after its first stage, or
/// else before any other collective starts on that communicator (crown_comm() starts
/// it, waiting for the first stage), whichever comes first. There is at most one
/// deferred stage per communicator: deferring a second one starts the first.
class deferred_stage {
public:
  virtual ~deferred_stage() = default;
  /// Waits for the first stage (serving one-sided requests) and starts the second.
  virtual void start_next_stage() = 0;
};
/// Registers `op`'s next stage on `c` (starting a stage already deferred there first).
void defer_stage(MPI_Comm c, deferred_stage* op);
/// Removes `op`'s registration (it starts its stage itself, or is gone); no-op if absent.
void forget_stage(MPI_Comm c, deferred_stage* op) noexcept;
/// Starts the stage deferred on `c`, if any (crown_comm calls it).
void start_deferred_stage(MPI_Comm c);

} // namespace crown::detail
