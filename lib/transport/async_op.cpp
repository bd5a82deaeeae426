// The operations crown::completion holds: tests, waits (with stall reports) and release.
#include "async_op.hpp"
#include "progress_thread.hpp"
#include "stall_watch.hpp"
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>

namespace crown::detail {
namespace {

constexpr auto unserved_after = std::chrono::seconds(5);
constexpr auto hung_after = std::chrono::seconds(60);

/// Waits until `done()`, naming the first operation still pending if it stalls.
template <typename Done>
void wait_for(const std::vector<async_handle>& ops, Done&& done) {
  stall_watch watch(ops.front()->target(), "waiting for a transfer");
  backoff pause;
  while (!done()) {
    pause.pause();
    if (!ops.empty()) watch.retarget(ops.front()->target());
    watch.poll();
  }
}

} // namespace

void stall_watch::check() noexcept {
  const auto waited = std::chrono::steady_clock::now() - since_;
  const bool served = progress_thread_running();
  if (waited < (served ? hung_after : unserved_after)) return;
  reported_ = true;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(waited).count();
  if (served)
    log(log_level::warn, what_, ": rank ", target_, " has not answered for ", seconds,
        " s although its progress thread should serve it: it may hang or have lost contact");
  else
    log(log_level::warn, what_, ": rank ", target_, " has not answered for ", seconds,
        " s. No progress thread serves one-sided requests in this job (it needs "
        "MPI_THREAD_MULTIPLE, or CROWN_PROGRESS_THREAD is 0), so a rank answers only inside "
        "Crown calls: rank ",
        target_,
        " most likely computes or blocks in its own MPI calls. Call into Crown there "
        "(crown::progress()), or initialise MPI with MPI_THREAD_MULTIPLE.");
}

bool test_local(const std::vector<async_handle>& ops) {
  progress();
  bool all = true;
  for (const auto& op : ops) all = op->test_local() && all;
  return all;
}

void wait_local(const std::vector<async_handle>& ops) {
  wait_for(ops, [&] { return test_local(ops); });
}

bool test_remote(std::vector<async_handle>& ops) {
  progress();
  std::erase_if(ops, [](const async_handle& op) { return op->test_remote(); });
  return ops.empty();
}

void wait_remote(std::vector<async_handle>& ops) {
  wait_for(ops, [&] { return test_remote(ops); });
}

void wait_remote(async_op& op, const char* what) {
  stall_watch watch(op.target(), what);
  backoff pause;
  for (progress(); !op.test_remote(); progress()) {
    pause.pause();
    watch.poll();
  }
}

void async_op_release::operator()(async_op* op) const noexcept {
  try {
    wait_remote(*op, "releasing a transfer");
  } catch (const std::exception& e) { // nobody waited to hear it: say it here
    log(log_level::error, "an asynchronous transfer that was never waited on failed: ", e.what());
  }
  delete op;
}

} // namespace crown::detail
