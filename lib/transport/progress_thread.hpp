// lib/transport/progress_thread.hpp — Crown's background progress (CROWN_PROGRESS_THREAD).
#pragma once
#include "symmetric_heap.hpp"
#include <thread>
#include <vector>

namespace crown::detail {

/// Drives the progress of `h`'s transport (and of the active messages beside it, for
/// remote_buffer requests) until stopped, so that a rank computing or sitting in its own
/// MPI calls still serves other ranks' one-sided requests. It steps aside (naps) while
/// a thread of the process polls inside a Crown wait, which progresses anyway. Busy while
/// traffic moves (20 us naps while this rank's own transfers are alive and moving);
/// after 1 ms without any it naps for 100 us at a time, after 100 ms
/// for 5 ms (UCX: asleep on the worker's event fd, woken by traffic at once, and by a
/// large transfer queued for it). It runs on `cpus` (none: where its rank is bound) and
/// is named crown-progress. `without_mpi` (below MPI_THREAD_MULTIPLE, where a second
/// thread may not call MPI): it drives only what serves requests without an MPI call
/// (symmetric_heap::progress_without_mpi), and only where the transport can.
std::jthread launch_progress_thread(symmetric_heap& h, std::vector<int> cpus, bool without_mpi);

/// Whether a progress thread serves this rank (the stall reports depend on it).
bool progress_thread_running() noexcept;
/// True on the progress thread itself (a backend may keep some calls off it).
bool on_progress_thread() noexcept;

} // namespace crown::detail
