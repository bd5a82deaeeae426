// lib/transport/progress_thread.hpp — Crown's background progress (CROWN_PROGRESS_THREAD).
#pragma once
#include "backend.hpp"
#include <thread>

namespace crown::detail {

/// Drives `b`'s progress until stopped, so that a rank computing or sitting in its own
/// MPI calls still serves other ranks' one-sided requests. Busy while traffic moves;
/// after 1 ms without any it idles in naps of about 100 us (UCX: asleep on the
/// worker's event fd, woken by traffic), so an idle rank costs well under 2% of a core.
std::jthread launch_progress_thread(backend& b);

/// Whether a progress thread serves this rank (the stall reports depend on it).
bool progress_thread_running() noexcept;

} // namespace crown::detail
