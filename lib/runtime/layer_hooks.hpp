// lib/runtime/layer_hooks.hpp — how the layers above the runtime join its lifetime
// without the runtime including them. A layer registers start-up stages (from a static
// object in its own library); crown::runtime starts them in `order` once topology and
// configuration are known, before the world mesh exists, and stops them in reverse at
// shutdown, before any communicator is freed. Invariant: the runtime layer names no
// file of the layers above it (cmake/layers.txt; the CTest `layers`).
#pragma once
#include <memory>
#include <span>
#include <string_view>

namespace crown::detail {

struct runtime_state;

struct layer_stage {
  int order = 0;         ///< start order among all stages, lowest first; stop in reverse
  std::string_view name; ///< the start-up step's name in errors ("symmetric heap")
  bool agreed = true;    ///< start inside agreed_step: a failure on one rank reaches all
  /// Collective over the world (every rank runs every stage, in order).
  void (*start)(runtime_state&) = nullptr;
  /// At a normal destruction only, while the world mesh and communicators still exist:
  /// collective, in reverse order, before any stop. Reports its own failures.
  void (*finish)(runtime_state&) noexcept = nullptr;
  /// At shutdown, also after a failed start (whether or not `start` ran or finished).
  void (*stop)(runtime_state&) noexcept = nullptr;
};

/// Adds a stage; returns true (for a static initialiser). Not thread-safe: static
/// initialisation only.
bool register_layer_stage(const layer_stage& stage);
/// The registered stages in start order.
std::span<const layer_stage> layer_stages() noexcept;

/// What a layer keeps per runtime, created empty by its stages' first use and destroyed
/// after every stage stopped. Look-ups after start-up do not modify the map.
std::shared_ptr<void>& layer_slot(runtime_state& st, std::string_view layer);
template <typename T>
T& layer_data(runtime_state& st, std::string_view layer) {
  auto& slot = layer_slot(st, layer);
  if (!slot) slot = std::make_shared<T>();
  return *static_cast<T*>(slot.get());
}

/// Whether a progress thread serves this rank, as the layer that runs one reports it
/// (false when none registered a query): the stall reports depend on it.
using progress_thread_query = bool (*)() noexcept;
void set_progress_thread_query(progress_thread_query q) noexcept;
bool progress_thread_serves() noexcept;

} // namespace crown::detail
