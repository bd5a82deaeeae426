// include/crown/detail/single_copy.hpp — kernel copies between the processes of one host.
#pragma once
#include <crown/mesh.hpp>

namespace crown::detail {

/// Whether host-local co_* on a mesh read the other images' buffers with one kernel
/// copy (process_vm_readv): not yet asked (no reduction needed it), refused by the
/// ptrace rules or a failed read (staged copies instead), or in use.
enum class single_copy_state { unprobed, unavailable, in_use };

/// Where `m`'s host-local co_* stand (for tests and diagnostics).
[[nodiscard]] single_copy_state host_single_copy_state(const mesh& m);

/// True while Crown has made this process readable by any process of its user
/// (PR_SET_PTRACER_ANY), which it does only under Yama ptrace_scope 1, and only when
/// a reduction needs it and nothing else allows the reads.
[[nodiscard]] bool host_ptracer_granted() noexcept;

} // namespace crown::detail
