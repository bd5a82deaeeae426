// lib/transport/buffer_registry.hpp — the owner's side of remote_buffer requests.
#pragma once
#include "am_codec.hpp"
#include <cstdint>
#include <functional>
#include <span>

namespace crown::detail {

/// True once this process registered a remote_buffer in this runtime: requests for it,
/// or for one since freed (to be refused), may come and need serving.
bool buffers_registered() noexcept;

/// Calls `access` with the base address of remote_buffer `id` of this process while
/// holding the registry's lock, so that the buffer cannot be freed meanwhile (`runs`
/// are offsets from that base). Refuses, without calling it, a buffer that is gone (or
/// of another generation) and runs outside it.
am_status serve_buffer_request(std::uint64_t id, std::uint32_t generation,
                               std::span<const run> runs,
                               const std::function<void(std::byte* base)>& access);

} // namespace crown::detail
