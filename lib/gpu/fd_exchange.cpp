// Descriptor exchange between the ranks of one host over abstract Unix sockets.
#include "fd_exchange.hpp"
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <crown/error.hpp>
#include <cstdint>
#include <cstring>
#include <poll.h>
#include <random>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace crown::detail {
namespace {

/// Where a rank listens, announced to the others over MPI.
struct endpoint {
  std::int32_t pid = 0;
  std::uint64_t token = 0;
};

/// What a connection carries beside the descriptor: the sender's rank in `host`.
struct note {
  std::int32_t rank = -1;
  std::uint64_t token = 0; ///< the receiver's token, so a stray connection is refused
};

/// A message of one `note` and room for one descriptor (SCM_RIGHTS).
struct message {
  note n;
  iovec io{&n, sizeof n};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  message() {
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
  }
  message(const message&) = delete;
  message& operator=(const message&) = delete;
};

sockaddr_un address_of(const endpoint& e, socklen_t& length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // Abstract namespace: sun_path starts with a NUL byte; no file is ever created.
  const int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "crown-fd-%d-%016llx",
                              static_cast<int>(e.pid), static_cast<unsigned long long>(e.token));
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

std::string failure(const std::string& call) { return call + ": " + std::strerror(errno); }

void send_descriptor(const endpoint& to, int fd, const note& n, std::string& problem) {
  unique_fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) return void(problem = failure("socket"));
  socklen_t length = 0;
  const sockaddr_un a = address_of(to, length);
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&a), length) != 0)
    return void(problem =
                    failure("connect") + " (the socket of pid " + std::to_string(to.pid) + ")");
  message out;
  out.n = n;
  cmsghdr* c = CMSG_FIRSTHDR(&out.m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (::sendmsg(s.get(), &out.m, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof n))
    problem = failure("sendmsg(SCM_RIGHTS)");
}

/// Accepts one connection (waiting at most 60 s), checks its sender and takes its
/// descriptor into `got`.
void receive_descriptor(int listener, const std::vector<endpoint>& all, std::uint64_t token,
                        std::vector<unique_fd>& got, std::string& problem) {
  pollfd p{listener, POLLIN, 0};
  int ready = 0; // a signal the process survives (crown::stop_signals) interrupts poll
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  do {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
  } while (ready < 0 && errno == EINTR);
  if (ready != 1) return void(problem = "no peer connected within 60 s");
  unique_fd s(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!s) return void(problem = failure("accept4"));
  ucred who{};
  socklen_t who_length = sizeof who;
  if (::getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &who, &who_length) != 0)
    return void(problem = failure("getsockopt(SO_PEERCRED)"));
  message in;
  const ssize_t r = ::recvmsg(s.get(), &in.m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  const note& n = in.n;
  cmsghdr* c = r == static_cast<ssize_t>(sizeof n) ? CMSG_FIRSTHDR(&in.m) : nullptr;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
    return void(problem = r < 0 ? failure("recvmsg") : "a connection carried no descriptor");
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  unique_fd owned(fd);
  const int size = static_cast<int>(all.size());
  if (n.token != token || n.rank < 0 || n.rank >= size || all[n.rank].pid != who.pid)
    return void(problem = "refused a descriptor from pid " + std::to_string(who.pid) +
                          " claiming rank " + std::to_string(n.rank) +
                          " (not a rank of this job on this host)");
  if (got[n.rank]) return void(problem = "rank " + std::to_string(n.rank) + " sent twice");
  got[n.rank] = std::move(owned);
}

} // namespace

std::vector<unique_fd> exchange_fds(MPI_Comm host, int mine) {
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(host, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(host, &size), "MPI_Comm_size");
  std::vector<unique_fd> got(static_cast<std::size_t>(size));
  if (size == 1) return got;

  std::string problem;
  endpoint self{static_cast<std::int32_t>(::getpid()), std::random_device{}()};
  self.token = self.token << 32 ^ std::random_device{}();
  unique_fd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  socklen_t length = 0;
  const sockaddr_un a = address_of(self, length);
  if (!listener)
    problem = failure("socket");
  else if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&a), length) != 0)
    problem = failure("bind(abstract socket)");
  else if (::listen(listener.get(), size) != 0)
    problem = failure("listen");
  if (!problem.empty()) self.pid = 0; // tells the others not to connect

  std::vector<endpoint> all(static_cast<std::size_t>(size));
  check_mpi(MPI_Allgather(&self, sizeof self, MPI_BYTE, all.data(), sizeof self, MPI_BYTE, host),
            "MPI_Allgather(descriptor endpoints)");
  bool everyone_listens = true;
  for (const endpoint& e : all) everyone_listens = everyone_listens && e.pid != 0;
  if (everyone_listens) {
    // Every send completes without the receiver's accept (the backlog holds `size`
    // connections, a socket buffer one small message), so no rank waits for another here.
    for (int k = 1; k < size && problem.empty(); ++k) {
      const int to = (rank + k) % size;
      send_descriptor(all[static_cast<std::size_t>(to)], mine,
                      {rank, all[static_cast<std::size_t>(to)].token}, problem);
    }
    // Agreed before anyone accepts: a rank whose send failed sent no more, and the
    // others would wait the whole accept timeout for its connections.
    int sent = problem.empty(), all_sent = 0;
    check_mpi(MPI_Allreduce(&sent, &all_sent, 1, MPI_INT, MPI_MIN, host),
              "MPI_Allreduce(descriptors sent)");
    if (!all_sent && problem.empty()) problem = "another rank of this host could not send";
    for (int k = 1; k < size && problem.empty(); ++k)
      receive_descriptor(listener.get(), all, self.token, got, problem);
  } else if (problem.empty()) {
    problem = "another rank of this host could not listen";
  }

  // One agreement: every rank learns whether the exchange worked everywhere.
  int ok = problem.empty(), everywhere = 0;
  check_mpi(MPI_Allreduce(&ok, &everywhere, 1, MPI_INT, MPI_MIN, host),
            "MPI_Allreduce(descriptor exchange)");
  if (!everywhere)
    throw state_error("passing file descriptors between the ranks of this host",
                      problem.empty() ? "another rank of this host failed (see its error)"
                                      : problem);
  return got;
}

} // namespace crown::detail
