// lib/runtime/trace_control.hpp — the runtime's side of CROWN_TRACE (include/crown/trace.hpp):
// a trace starts with crown::runtime and is written when it shuts down.
#pragma once
#include <mpi.h>
#include <string>

namespace crown::detail {

/// With a non-empty `dir`: creates it if missing and opens this rank's file
/// dir/crown-trace.<rank>.json (a config_error naming the path and the cause when it
/// cannot). Local: the runtime agrees on the outcome before trace_begin.
void trace_open(int rank, int size, const std::string& dir, const std::string& host);
/// After every rank's trace_open succeeded: estimates this rank's clock offset against
/// rank 0 and turns recording on. Collective over `world` when a trace file is open
/// (every rank has the same CROWN_TRACE: start-up checks it); nothing otherwise.
void trace_begin(MPI_Comm world);
/// Turns recording off and writes every thread's events to the file; nothing without a
/// trace_start. Reports a failed write as an error log line, never throws.
void trace_finish() noexcept;
/// trace_finish on the way to MPI_Abort (CROWN_WAIT_TIMEOUT): the open spans are written
/// as unfinished, so the file shows what the rank was waiting for. Skipped if another
/// thread holds the trace registry at that moment.
void trace_finish_before_abort() noexcept;

} // namespace crown::detail
