// The descriptor exchange the device heap uses (SCM_RIGHTS over abstract Unix sockets)
// between the ranks of each host, with memfds instead of CUDA handles: no GPU needed.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <crown/crown.hpp>
#include <gpu/fd_exchange.hpp>
#include <harness/crown_test.hpp>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace {

MPI_Comm host_comm() {
  MPI_Comm host = MPI_COMM_NULL;
  MPI_Comm_split_type(crown_test::w().comm(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  return host;
}

std::string contents(int fd) {
  char text[64] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  return n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string("<unreadable>");
}

} // namespace

BOOST_AUTO_TEST_CASE(every_rank_receives_every_other_ranks_descriptor) {
  MPI_Comm host = host_comm();
  int me = 0, size = 0;
  MPI_Comm_rank(host, &me);
  MPI_Comm_size(host, &size);
  crown::detail::unique_fd mine(::memfd_create("crown-test", MFD_CLOEXEC));
  BOOST_TEST_REQUIRE(static_cast<bool>(mine));
  const std::string text = "host rank " + std::to_string(me) + " of " + std::to_string(size);
  BOOST_TEST_REQUIRE(::pwrite(mine.get(), text.data(), text.size(), 0) ==
                     static_cast<ssize_t>(text.size()));

  for (int round = 0; round < 3; ++round) { // repeated set-ups do not meet stale sockets
    auto got = crown::detail::exchange_fds(host, mine.get());
    BOOST_TEST_REQUIRE(got.size() == static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) {
      if (r == me) {
        BOOST_TEST(!got[static_cast<std::size_t>(r)]);
        continue;
      }
      BOOST_TEST_REQUIRE(static_cast<bool>(got[static_cast<std::size_t>(r)]));
      BOOST_TEST(contents(got[static_cast<std::size_t>(r)].get()) ==
                 "host rank " + std::to_string(r) + " of " + std::to_string(size));
    }
  }
  MPI_Comm_free(&host);
}

BOOST_AUTO_TEST_CASE(a_descriptor_written_through_is_seen_by_its_owner) {
  // The receivers get the same open file, not a copy: what they write, the owner reads.
  MPI_Comm host = host_comm();
  int me = 0, size = 0;
  MPI_Comm_rank(host, &me);
  MPI_Comm_size(host, &size);
  crown::detail::unique_fd mine(::memfd_create("crown-test", MFD_CLOEXEC));
  BOOST_TEST_REQUIRE(::ftruncate(mine.get(), 4096) == 0);
  auto got = crown::detail::exchange_fds(host, mine.get());
  const int right = (me + 1) % size;
  if (size > 1) {
    const char mark = static_cast<char>('A' + me);
    BOOST_TEST(::pwrite(got[static_cast<std::size_t>(right)].get(), &mark, 1, me) == 1);
  }
  MPI_Barrier(host);
  if (size > 1) {
    const int left = (me + size - 1) % size;
    char seen = 0;
    BOOST_TEST(::pread(mine.get(), &seen, 1, left) == 1);
    BOOST_TEST(seen == static_cast<char>('A' + left));
  }
  MPI_Comm_free(&host);
}

BOOST_AUTO_TEST_CASE(a_failed_send_fails_every_rank_without_waiting_for_its_connections) {
  // Host rank 0 offers no descriptor (sendmsg: EBADF): it sends nothing to anyone, and
  // the others learn it before they wait (up to 60 s) for connections that never come.
  MPI_Comm host = host_comm();
  int me = 0, size = 0;
  MPI_Comm_rank(host, &me);
  MPI_Comm_size(host, &size);
  if (size > 1) {
    crown::detail::unique_fd mine(::memfd_create("crown-test", MFD_CLOEXEC));
    const auto start = std::chrono::steady_clock::now();
    const std::string what = crown_test::what_of<crown::state_error>(
        [&] { (void)crown::detail::exchange_fds(host, me == 0 ? -1 : mine.get()); });
    const auto waited = std::chrono::steady_clock::now() - start;
    BOOST_TEST(what.find("passing file descriptors between the ranks of this host") !=
               std::string::npos);
    const char* cause =
        me == 0 ? "sendmsg(SCM_RIGHTS)" : "another rank of this host could not send";
    BOOST_TEST(what.find(cause) != std::string::npos, what);
    BOOST_TEST(waited < std::chrono::seconds(30)); // not the accept timeout
  }
  MPI_Comm_free(&host);
}
