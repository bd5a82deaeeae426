// include/crown/actor/wire.hpp — the kinds of controller messages, shared by the typed
// front end and the serving engine.
#pragma once
#include <cstdint>

namespace crown {

/// Reductions along the reply tree (actor_mesh::reduce).
enum class reduce_op : std::uint8_t { sum = 1, min = 2, max = 3 };

namespace detail {

/// Commands (spawn, call, stop of the session, stop_mesh) fan out along a tree; replies
/// come back along it; notes are one-way (supervision events, port messages, and the
/// notice that a port's receiver is gone).
enum class message_kind : std::uint16_t {
  spawn = 1,
  call = 2,
  stop = 3,
  reply = 4,
  stop_mesh = 5,
  supervise = 6,
  port = 7,
  port_closed = 8,
};
/// What a command's targets send back: every value, one value reduced along the tree,
/// only errors (broadcast), or every value straight to the caller as it is ready.
enum class reply_mode : std::uint8_t { gather = 0, reduce = 1, errors_only = 2, stream = 3 };

} // namespace detail
} // namespace crown
