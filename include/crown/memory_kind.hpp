// include/crown/memory_kind.hpp — where an allocation's bytes live.
#pragma once

namespace crown {

/// Each kind has its own symmetric heap. `cuda` arrives with the GPU work; it is in
/// the type now so that device memory needs no redesign.
enum class memory_kind { host, cuda };

} // namespace crown
