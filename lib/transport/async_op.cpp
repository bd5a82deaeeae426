// The operations crown::completion holds: tests, waits (named in stall reports) and release.
#include "async_op.hpp"
#include <crown/detail/heap.hpp>
#include <crown/detail/wait.hpp>
#include <crown/log.hpp>

namespace crown::detail {
namespace {

/// Waits until `done()`, naming the first operation still pending if it stalls.
template <typename Done>
void wait_for(const std::vector<async_handle>& ops, Done&& done) {
  if (done()) return; // also an empty list, which names no target
  backoff pause(wait_site{"waiting for a transfer", ops.front()->target(), nullptr, true});
  while (!done()) {
    pause.pause();
    if (!ops.empty()) pause.retarget(ops.front()->target());
  }
}

} // namespace

std::atomic<int>& operations_alive() noexcept {
  static std::atomic<int> alive{0};
  return alive;
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
  backoff pause(wait_site{what, op.target(), nullptr, true});
  for (progress(); !op.test_remote(); progress()) pause.pause();
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
