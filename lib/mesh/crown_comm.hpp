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

} // namespace crown::detail
