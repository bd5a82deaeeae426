/* tests/onesided/ucx_preemption_shim.c — LD_PRELOADed by progress.window.preempted.
 *
 * Makes a rare preemption certain: every 50th ucp_atomic_fetch_nb that returns a
 * pending request sleeps 300 us before returning to its caller, as if the thread had
 * been descheduled right there. Open MPI 4.1's osc/ucx MPI_Rput/MPI_Rget attach their
 * MPI request to the operation only after this call returns; another thread driving
 * MPI's progress meanwhile completes the operation first and the request never does.
 * Crown's window must not depend on that window of time. Nothing else changes: the
 * real call runs, with its real result. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

typedef ucs_status_ptr_t (*atomic_fetch_fn)(ucp_ep_h, ucp_atomic_fetch_op_t, uint64_t, void*,
                                            size_t, uint64_t, ucp_rkey_h, ucp_send_callback_t);

ucs_status_ptr_t ucp_atomic_fetch_nb(ucp_ep_h ep, ucp_atomic_fetch_op_t opcode, uint64_t value,
                                     void* result, size_t op_size, uint64_t remote_addr,
                                     ucp_rkey_h rkey, ucp_send_callback_t cb) {
  static atomic_fetch_fn real;
  static atomic_long pending;
  if (!real) real = (atomic_fetch_fn)dlsym(RTLD_NEXT, "ucp_atomic_fetch_nb");
  ucs_status_ptr_t status = real(ep, opcode, value, result, op_size, remote_addr, rkey, cb);
  if (UCS_PTR_IS_PTR(status) && atomic_fetch_add(&pending, 1) % 50 == 49) usleep(300);
  return status;
}
