// lib/transport/buffer_registry.hpp — the owner's side of remote_buffer requests.
#pragma once
#include "am_codec.hpp"
#include <cstdint>
#include <span>

namespace crown::detail {

/// Copies between remote_buffer `id` of this process and `data` (consecutive bytes,
/// in run order; `write`: into the buffer) while holding the registry's lock, so that
/// the buffer cannot be freed meanwhile. Refuses a buffer that is gone (or of another
/// generation) and runs outside it.
/// True once this process registered a remote_buffer in this runtime: requests for it,
/// or for one since freed (to be refused), may come and need serving.
bool buffers_registered() noexcept;

am_status serve_buffer_request(std::uint64_t id, std::uint32_t generation, bool write,
                               std::span<const run> runs, std::byte* data);

} // namespace crown::detail
