// Kernel copies between the processes of one host (process_vm_readv) in co_*: asked for
// only when a reduction needs them, refused alike on every image, off with
// CROWN_SINGLE_COPY=0. Every case checks the reduced data. Run with and without the
// setting (variant single_copy0).
#include "transport/host_collectives.hpp" // forget_host_scratch, not installed
#include "transport/test_hooks.hpp"       // host_single_copy_state, not installed
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <crown/crown.hpp>
#include <crown/detail/heap.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <harness/crown_test.hpp>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

using crown::detail::single_copy_state;
using namespace crown_test;

namespace {

bool setting_off() {
  const char* v = std::getenv("CROWN_SINGLE_COPY");
  return v && std::string(v) == "0";
}

/// Whether the ptrace rules let one process of a user read another's memory without
/// any grant: no Yama, or its classic scope 0 (the tests run as one user).
bool reads_allowed_without_grant() {
  std::FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (!f) return true;
  int scope = -1;
  const bool read = std::fscanf(f, "%d", &scope) == 1;
  std::fclose(f);
  return read && scope == 0;
}

/// Sums `count` doubles of ordinary memory (not the heap) over `m` and checks every
/// element against the serial result.
bool sum_is_right(const crown::mesh& m, std::size_t count) {
  auto value = [](std::size_t i, int r) { return double(i % 977) + 1000.0 * r; };
  std::vector<double> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = value(i, m.rank());
  crown::co_sum(m, std::span(v));
  bool ok = true;
  for (std::size_t i = 0; i < count; ++i) {
    double expected = 0;
    for (int r = 0; r < m.size(); ++r) expected += value(i, r);
    ok = ok && v[i] == expected;
  }
  return ok;
}

bool all_shared() {
  for (int r = 0; r < n(); ++r)
    if (!crown::detail::heap_peer_address(r, 0)) return false;
  return true;
}

/// Switches CAP_SYS_PTRACE in the effective set (root reads every process with it).
void ptrace_capability(bool on) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return;
  const unsigned bit = 1u << (CAP_SYS_PTRACE % 32);
  auto& word = data[CAP_SYS_PTRACE / 32].effective;
  word = on ? (word | (data[CAP_SYS_PTRACE / 32].permitted & bit)) : (word & ~bit);
  syscall(SYS_capset, &header, data);
}

} // namespace

BOOST_AUTO_TEST_CASE(reductions_without_kernel_copies_ask_for_nothing) {
  // Scalars, small vectors and heap data never read another process: the first co_* of
  // a mesh once set PR_SET_PTRACER_ANY and probed process_vm_readv all the same.
  BOOST_TEST_REQUIRE(all_shared());
  BOOST_TEST((crown::detail::host_single_copy_state(w()) == single_copy_state::unprobed));
  double x = me() + 1.0;
  crown::co_sum(w(), x);
  BOOST_TEST(x == n() * (n() + 1) / 2.0);
  BOOST_TEST(sum_is_right(w(), 8192)); // 64 KiB: staged, the kernel copies start above
  crown::coarray<double> heap(w(), 100000);
  std::fill(heap.data(), heap.data() + 100000, 1.0 + me());
  crown::co_sum(w(), std::span(heap.data(), 100000));
  BOOST_TEST((heap.data()[0] == n() * (n() + 1) / 2.0 && heap.data()[99999] == heap.data()[0]));
  BOOST_TEST((crown::detail::host_single_copy_state(w()) == single_copy_state::unprobed));
  BOOST_TEST(!crown::detail::host_ptracer_granted());
}

BOOST_AUTO_TEST_CASE(large_reductions_use_kernel_copies_unless_switched_off) {
  crown::detail::set_host_single_copy_timed(false); // whether they pay here or not
  BOOST_TEST(sum_is_right(w(), 100003));
  crown::detail::set_host_single_copy_timed(true);
  const auto state = crown::detail::host_single_copy_state(w());
  if (setting_off()) {
    BOOST_TEST((state == single_copy_state::unprobed)); // never asked
    BOOST_TEST(!crown::detail::host_ptracer_granted());
  } else if (reads_allowed_without_grant()) {
    BOOST_TEST((state == single_copy_state::in_use));
    BOOST_TEST(!crown::detail::host_ptracer_granted()); // nothing needed it
  } else {
    BOOST_TEST((state != single_copy_state::unprobed));
  }
  BOOST_TEST(sum_is_right(w(), 300000)); // and again, on the path now chosen
}

BOOST_AUTO_TEST_CASE(an_image_nobody_may_read_makes_every_image_stage) {
  // The last image becomes unreadable (not dumpable, and nobody holds CAP_SYS_PTRACE):
  // the others' reads of it fail, so every image, the last one too, must stage.
  std::vector<int> ranks(w().begin(), w().end());
  std::reverse(ranks.begin(), ranks.end()); // a mesh that has not reduced yet
  const crown::mesh reversed({{"r", n()}}, ranks);
  ptrace_capability(false);
  if (me() == n() - 1) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  const bool right = sum_is_right(reversed, 100003);
  const auto state = crown::detail::host_single_copy_state(reversed);
  if (me() == n() - 1) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  ptrace_capability(true);
  BOOST_TEST(right);
  if (setting_off())
    BOOST_TEST((state == single_copy_state::unprobed));
  else if (n() > 1)
    BOOST_TEST((state == single_copy_state::unavailable));
  BOOST_TEST(!crown::detail::host_ptracer_granted()); // a grant that did not help is undone
  BOOST_TEST(sum_is_right(reversed, 100003));
}

BOOST_AUTO_TEST_CASE(kernel_copies_are_kept_only_where_they_measure_faster) {
  // The probe times a kernel copy against a copy through the heap, and every image
  // must take the same path (their flag barriers differ). The world's scratch was
  // probed untimed above: dropped here, on every image at once, so it is probed again.
  crown::detail::forget_host_scratch();
  BOOST_TEST(sum_is_right(w(), 100003));
  const auto state = crown::detail::host_single_copy_state(w());
  int mine = static_cast<int>(state), lowest = 0, highest = 0;
  MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &highest, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  BOOST_TEST(lowest == highest); // one answer everywhere
  if (setting_off())
    BOOST_TEST((state == single_copy_state::unprobed));
  else if (reads_allowed_without_grant())
    BOOST_TEST((state == single_copy_state::in_use || state == single_copy_state::slower));
  BOOST_TEST(sum_is_right(w(), 300001)); // and on the path it chose
}
