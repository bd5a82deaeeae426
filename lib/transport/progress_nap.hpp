// lib/transport/progress_nap.hpp — the progress thread's naps, which others can end early.
#pragma once
#include <chrono>

namespace crown::detail {

/// Sleeps up to `limit`, or until wake_progress_thread() (a futex, so neither side
/// spins). The progress thread's naps go through it.
void progress_nap(std::chrono::microseconds limit) noexcept;

/// Ends the progress thread's current nap, if it is in one: work was queued for it (a
/// large transfer to issue) or it is to stop. Cheap when it is awake (an atomic add).
void wake_progress_thread() noexcept;

} // namespace crown::detail
