// lib/transport/caf_interface.hpp — the internals libcrown_caf (fortran_bindings/caf/,
// gfortran's -fcoarray=lib runtime) builds on, named in one place: the heap ABI under
// the coarray templates, the byte collectives and Crown's wait. libcrown_caf calls
// crown::caf_api and nothing else of crown::detail; the interface changes together with
// libcrown_caf, never with user code. Not installed: fortran_bindings reaches it through
// a private include path.
#pragma once
#include <crown/collectives.hpp>
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>

namespace crown::caf_api {

// Heap blocks: collective and local allocation, addresses.
using detail::heap_address;
using detail::heap_allocate;
using detail::heap_allocate_local;
using detail::heap_block;
using detail::heap_offset_of;
using detail::heap_peer_address;
using detail::heap_release;
using detail::heap_release_local;
// Transfers, atomics and ordering.
using detail::atomic_op;
using detail::heap_quiet;
using detail::heap_sync_local;
using detail::remote_atomic;
using detail::remote_get;
using detail::remote_get_strided;
using detail::remote_put;
using detail::remote_put_strided;
using detail::strided;
// Collectives on bytes and built-in types.
using detail::co_builtin;
using detail::co_gather_bytes;
using detail::reduction;
// Waiting (spin, yield, nap; the stall report).
using detail::backoff;

} // namespace crown::caf_api
