// What backends share by default.
#include "backend.hpp"

namespace crown::detail {

void backend::put_notify(int rank, std::span<const run> runs, const std::byte* packed,
                         std::uint64_t flag, std::int64_t add) {
  if (async_handle op = start(true, rank, runs, const_cast<std::byte*>(packed)))
    wait_remote(*op, "put_notify");
  (void)atomic(rank, flag, atomic_op::add, 8, false, static_cast<std::uint64_t>(add), 0);
}

} // namespace crown::detail
