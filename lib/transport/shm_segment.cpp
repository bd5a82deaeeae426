// Per-host shared segment: created by local rank 0, mapped by all, unlinked at once.
#include "shm_segment.hpp"
#include <atomic>
#include <cerrno>
#include <crown/error.hpp>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace crown::detail {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

std::string dev_shm_free() {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) != 0) return "unknown";
  return std::to_string(static_cast<unsigned long long>(s.f_bavail) * s.f_frsize) + " bytes";
}

} // namespace

shm_segment::shm_segment(MPI_Comm host_comm, std::size_t bytes_per_rank)
    : bytes_per_rank_(bytes_per_rank) {
  int local_rank = 0, local_size = 0;
  check_mpi(MPI_Comm_rank(host_comm, &local_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(host_comm, &local_size), "MPI_Comm_size");
  total_ = bytes_per_rank * static_cast<std::size_t>(local_size);

  // Rank 0 creates and reserves; the others learn the name (or the failure) by broadcast.
  static std::atomic<int> counter{0};
  char name[128] = {};
  char failure[512] = {};
  if (local_rank == 0) {
    std::snprintf(name, sizeof name, "/crown-%d-%d", static_cast<int>(getpid()), counter++);
    const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    int rc = fd < 0 ? errno : 0;
    if (rc == 0 && ftruncate(fd, static_cast<off_t>(total_)) != 0) rc = errno;
    if (rc == 0) rc = posix_fallocate(fd, 0, static_cast<off_t>(total_));
    if (fd >= 0) close(fd);
    if (rc != 0) {
      shm_unlink(name);
      std::snprintf(failure, sizeof failure,
                    "cannot reserve %zu bytes in /dev/shm for the symmetric heap (%s; free: %s): "
                    "lower CROWN_HEAP_SIZE or enlarge /dev/shm",
                    total_, errno_text(rc).c_str(), dev_shm_free().c_str());
    }
  }
  check_mpi(MPI_Bcast(name, sizeof name, MPI_CHAR, 0, host_comm), "MPI_Bcast(segment name)");
  check_mpi(MPI_Bcast(failure, sizeof failure, MPI_CHAR, 0, host_comm),
            "MPI_Bcast(segment status)");
  if (failure[0]) throw error("symmetric heap", failure);

  const int fd = shm_open(name, O_RDWR, 0600);
  int mapped = fd >= 0;
  void* base = MAP_FAILED;
  if (mapped) {
    base = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    mapped = base != MAP_FAILED;
  }
  const int my_errno = errno;
  int all_mapped = mapped;
  check_mpi(MPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, host_comm),
            "MPI_Allreduce(segment mapped)");
  if (local_rank == 0) shm_unlink(name); // every rank has it mapped (or gave up)
  if (mapped) base_ = static_cast<std::byte*>(base);
  if (!all_mapped) {
    if (base_) munmap(base_, total_);
    throw error("symmetric heap",
                mapped ? std::string("another rank of this host could not map ") + name
                       : "cannot map " + std::string(name) + ": " + errno_text(my_errno));
  }
}

shm_segment::~shm_segment() {
  if (base_) munmap(base_, total_);
  base_ = nullptr;
}

} // namespace crown::detail
