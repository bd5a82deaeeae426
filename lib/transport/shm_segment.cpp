// Per-host shared segment: an unnamed file of local rank 0, opened by the others via /proc.
#include "shm_segment.hpp"
#include "../runtime/memory_headroom.hpp"
#include "../runtime/unique_fd.hpp"
#include <cerrno>
#include <climits>
#include <crown/error.hpp>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace crown::detail {
namespace {

std::string dev_shm_free() {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) != 0) return "unknown";
  return std::to_string(static_cast<unsigned long long>(s.f_bavail) * s.f_frsize) + " bytes";
}

/// What local rank 0 tells the others: where its file is, or why there is none.
struct offer {
  enum status_t : std::int32_t { ok, heap_too_large, failed } status = ok;
  std::int32_t pid = 0, fd = -1;
  std::uint64_t device = 0, inode = 0;
  char text[768] = {};
};

void set_text(offer& o, offer::status_t status, const std::string& text) {
  o.status = status;
  std::snprintf(o.text, sizeof o.text, "%s", text.c_str());
}

/// An unnamed file: O_TMPFILE in /dev/shm (its size limit then applies, as it did to
/// named segments), else memfd_create (same shmem pages, no mount limit).
unique_fd create_unnamed(std::string& where, int& error) {
  where = "/dev/shm";
  unique_fd fd(open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (fd) return fd;
  const int tmpfile_error = errno;
  where = "memory (memfd)";
  fd = unique_fd(memfd_create("crown-heap", MFD_CLOEXEC));
  if (!fd) {
    error = errno;
    where = "/dev/shm (O_TMPFILE: " + std::string(std::strerror(tmpfile_error)) +
            ") or memory (memfd_create)";
  }
  return fd;
}

/// Local rank 0: creates and reserves the file; `o` says where it is or what failed.
unique_fd create_file(std::size_t per_rank, int ranks, std::size_t total, offer& o) {
  const std::string request = std::to_string(per_rank) + " bytes per rank x " +
                              std::to_string(ranks) +
                              " ranks on this host = " + std::to_string(total) + " bytes";
  // Reserving past the memory or cgroup limit is not refused: the OOM killer strikes.
  if (const memory_headroom room = current_memory_headroom(); total > room.bytes) {
    set_text(o, offer::heap_too_large,
             request + " do not fit in the " + std::to_string(room.bytes) +
                 " bytes of memory available (" + room.limited_by +
                 "): lower CROWN_HEAP_SIZE or run fewer ranks per host");
    return unique_fd();
  }
  std::string where;
  int rc = 0;
  unique_fd fd = create_unnamed(where, rc);
  if (fd && ftruncate(fd.get(), static_cast<off_t>(total)) != 0) rc = errno;
  if (fd && rc == 0) rc = posix_fallocate(fd.get(), 0, static_cast<off_t>(total));
  if (rc == ENOSPC && where == "/dev/shm")
    set_text(o, offer::heap_too_large,
             "cannot reserve " + request + " in /dev/shm (free: " + dev_shm_free() +
                 "): lower CROWN_HEAP_SIZE or enlarge /dev/shm (mount -o remount,size=...)");
  else if (rc == ENOSPC || rc == ENOMEM)
    set_text(o, offer::heap_too_large,
             "cannot reserve " + request + " in " + where + " (" + std::strerror(rc) +
                 "): lower CROWN_HEAP_SIZE or run fewer ranks per host");
  else if (rc != 0)
    set_text(o, offer::failed,
             "cannot create the shared heap file in " + where + ": " + std::strerror(rc));
  if (rc != 0) return unique_fd();
  struct stat st {};
  fstat(fd.get(), &st);
  o.pid = static_cast<std::int32_t>(getpid());
  o.fd = fd.get();
  o.device = st.st_dev;
  o.inode = st.st_ino;
  return fd;
}

/// The other ranks: local rank 0's descriptor, reopened through /proc (reading another
/// process's fd needs only PTRACE_MODE_READ, which Yama leaves to the uid rules).
unique_fd open_offered(const offer& o, std::string& problem) {
  const std::string path = "/proc/" + std::to_string(o.pid) + "/fd/" + std::to_string(o.fd);
  const std::string advice = ". The ranks of one host share their heaps through /proc: they must "
                             "run as one user in one PID namespace; CROWN_SHM=0 avoids sharing";
  unique_fd fd(open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) {
    problem = "cannot open local rank 0's heap file " + path + ": " + std::strerror(errno) + advice;
    return fd;
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || st.st_dev != o.device || st.st_ino != o.inode) {
    problem = path + " is not local rank 0's heap file" + advice;
    return unique_fd();
  }
  return fd;
}

} // namespace

shm_segment::shm_segment(MPI_Comm host_comm, std::size_t bytes_per_rank) {
  int local_rank = 0, local_size = 0;
  check_mpi(MPI_Comm_rank(host_comm, &local_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(host_comm, &local_size), "MPI_Comm_size");
  // Every rank of the host computes the same, so all of them throw or none does.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  if (bytes_per_rank > SIZE_MAX - page ||
      __builtin_mul_overflow((bytes_per_rank + page - 1) / page * page,
                             static_cast<std::size_t>(local_size), &total_) ||
      total_ > static_cast<std::size_t>(LLONG_MAX))
    throw config_error("CROWN_HEAP_SIZE", std::to_string(bytes_per_rank) + " bytes x " +
                                              std::to_string(local_size) +
                                              " ranks on this host overflows 63 bits");
  stride_ = total_ / static_cast<std::size_t>(local_size);

  offer o;
  unique_fd fd;
  if (local_rank == 0) fd = create_file(bytes_per_rank, local_size, total_, o);
  check_mpi(MPI_Bcast(&o, sizeof o, MPI_BYTE, 0, host_comm), "MPI_Bcast(heap file)");
  if (o.status == offer::heap_too_large) throw config_error("CROWN_HEAP_SIZE", o.text);
  if (o.status == offer::failed) throw error("symmetric heap", o.text);

  std::string problem;
  if (local_rank != 0) fd = open_offered(o, problem);
  void* base = MAP_FAILED;
  if (fd) {
    base = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) problem = std::string("cannot map the heap file: ") + strerror(errno);
  }
  if (base != MAP_FAILED) base_ = static_cast<std::byte*>(base);
  // Local rank 0 holds its descriptor until every rank has opened the file.
  int first_failed = base_ ? INT_MAX : local_rank;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, host_comm),
            "MPI_Allreduce(heap mapped)");
  if (first_failed == INT_MAX) return;
  if (base_) munmap(base_, total_);
  base_ = nullptr;
  throw error("symmetric heap", !problem.empty()
                                    ? problem
                                    : "local rank " + std::to_string(first_failed) +
                                          " of this host could not map the shared heap");
}

shm_segment::~shm_segment() {
  if (base_) munmap(base_, total_);
  base_ = nullptr;
}

} // namespace crown::detail
