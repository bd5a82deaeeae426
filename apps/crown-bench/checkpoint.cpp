// crown-bench checkpoint: a checkpoint of 256 MiB per rank (8 MiB with --smoke) written
// as one sharded dataset (collective MPI-IO, fsync, rename, directory fsync) against
// `dd conv=fsync` of the same bytes by as many writers at once; read back from the page
// cache and (after POSIX_FADV_DONTNEED on the file) from the disk, against dd reads of
// the same pieces. Files go to $BENCH_CHECKPOINT_DIR (default: the current directory; not a
// CROWN_ name, which the runtime would warn about), whose file system type is printed: on
// tmpfs fsync costs nothing (the write is a memory copy) and "uncached" reads are cached.
#include "bench.hpp"
#include <crown/checkpoint.hpp>
#include <crown/crown.hpp>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/vfs.h>
#include <unistd.h>

namespace crown_bench {

namespace {

std::string file_system_of(const std::string& dir) {
  struct statfs s {};
  if (statfs(dir.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
  case 0xEF53:
    return "ext4";
  case 0x01021994:
    return "tmpfs";
  case 0x58465342:
    return "xfs";
  case 0x9123683E:
    return "btrfs";
  case 0x794c7630:
    return "overlayfs";
  case 0x6969:
    return "nfs";
  case 0x0BD00BD0:
    return "lustre";
  case 0x47504653:
    return "gpfs";
  default:
    return "other";
  }
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

void drop_from_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

/// Seconds for every rank to run `command` at once (from a barrier to the last one done).
double all_run(const crown::mesh& w, const std::string& command) {
  w.barrier();
  const double start = MPI_Wtime();
  if (std::system(command.c_str()) != 0)
    throw crown::state_error("crown-bench checkpoint", "`" + command + "` failed");
  w.barrier();
  return MPI_Wtime() - start;
}

} // namespace

void checkpoint(const options& o) {
  const crown::mesh& w = crown::world();
  const int me = w.rank(), np = w.size();
  const char* env = std::getenv("BENCH_CHECKPOINT_DIR");
  const std::string dir = (env && *env) ? env : ".";
  const std::string base = dir + "/crown-bench-checkpoint";
  const std::size_t mib = o.smoke ? 8 : 256, bytes = mib << 20, n = bytes / sizeof(double);
  const std::size_t total = n * static_cast<std::size_t>(np);
  std::vector<double> piece(n), back(n);
  for (std::size_t k = 0; k < n; ++k) piece[k] = static_cast<double>(k) * 0.5 + me;
  const std::string path = base + ".h5", dd = base + ".dd" + std::to_string(me);
  const int runs = o.smoke ? 1 : 3;
  if (me == 0)
    std::printf("# checkpoint: %d writers x %zu MiB to %s (%s), CPU %s\n", np, mib, dir.c_str(),
                file_system_of(dir).c_str(), cpu_model().c_str());
  const std::string dd_write = "dd if=/dev/zero of=" + dd +
                               " bs=4M count=" + std::to_string(mib / 4) +
                               " conv=fsync status=none";
  std::vector<double> crown_w, dd_w, crown_rc, dd_rc, crown_ru, dd_ru;
  for (int r = 0; r < runs; ++r) {
    // Alternately, so that both see the same disk.
    dd_w.push_back(all_run(w, dd_write));
    std::filesystem::remove(dd);
    w.barrier();
    double start = MPI_Wtime();
    {
      crown::checkpoint_writer wr(w, path);
      wr.write_sharded<double>("flat", piece, total);
      wr.commit();
    }
    w.barrier();
    crown_w.push_back(MPI_Wtime() - start);
    // Reads: each rank its own piece, from the page cache, then from the disk.
    const std::string dd_read = "dd if=" + path + " of=/dev/null bs=1M skip=" +
                                std::to_string(mib * static_cast<std::size_t>(me)) +
                                " count=" + std::to_string(mib) + " status=none";
    for (bool cached : {true, false}) {
      if (!cached) {
        if (me == 0) drop_from_cache(path);
        w.barrier();
      }
      (cached ? dd_rc : dd_ru).push_back(all_run(w, dd_read));
      if (!cached) {
        if (me == 0) drop_from_cache(path);
        w.barrier();
      }
      // Into memory already touched, as a job restores into its own arrays (and dd
      // reads into its buffer).
      std::fill(back.begin(), back.end(), 0.0);
      w.barrier();
      start = MPI_Wtime();
      {
        crown::checkpoint_reader rd(w, path);
        rd.read_sharded_into("flat", crown::detail::ckpt_type_of<double>(), total, back.data(), n);
        if (back[n / 2] != piece[n / 2])
          throw crown::state_error("crown-bench checkpoint", "read back a wrong value");
      }
      w.barrier();
      (cached ? crown_rc : crown_ru).push_back(MPI_Wtime() - start);
    }
    if (me == 0) std::filesystem::remove(path);
    w.barrier();
  }
  const double gb = static_cast<double>(total * sizeof(double)) / 1e9;
  const std::string group = "checkpoint.np" + std::to_string(np);
  if (me == 0) {
    print_line(group, "write_fsync", total * sizeof(double), "GB/s", gb / median(crown_w),
               "dd_conv_fsync", gb / median(dd_w));
    print_line(group, "read_cached", total * sizeof(double), "GB/s", gb / median(crown_rc),
               "dd_read_cached", gb / median(dd_rc));
    print_line(group, "read_uncached", total * sizeof(double), "GB/s", gb / median(crown_ru),
               "dd_read_uncached", gb / median(dd_ru));
  }
}

} // namespace crown_bench
