// heat2d: the 2-D heat equation (explicit 5-point update, fixed edges) on an n x n
// grid, a dist_tensor with halos over a rows x cols mesh of all ranks.
//   mpirun -np 4 crown-heat2d [--n 1024] [--iterations 100] [--mesh 2x2] [--no-overlap]
//                             [--png heat2d.png] [--controller]
//                             [--checkpoint-every N] [--checkpoint-dir DIR] [--keep N] [--resume]
//                             [--gpu]
// Prints the throughput in million lattice updates per second and `checksum <sum>`,
// the sum of all cells in global order: bitwise the same for any rank count and mesh.
// With --controller, rank 0 drives the solver on the other ranks through a tensor
// engine, and runs the SPMD solver on the same ranks for comparison: both checksums
// (bitwise the same) and the ratio of their times. With --checkpoint-every N the field
// is checkpointed every N iterations (docs/checkpoint.md); --resume starts from the
// newest valid checkpoint in the directory, at any rank count, with the same checksum.
// With checkpoints, SIGTERM or SIGUSR1 (Slurm's preemption, requeue, or a job script's
// trap) makes every rank checkpoint after the iteration they agree on and exit with
// crown::stop_exit_status (75); --resume continues from there (jobscripts/README.md).
// With --gpu the fields live in device memory (device coarrays on each rank's GPU, a
// CUDA stencil kernel, halos put into the neighbours' device blocks): the same checksum,
// bitwise, and the same checkpoints (gpu_solver.hpp); built only where CUDA was found.
#include "controller_solver.hpp"
#include "heatmap_png.hpp"
#include "solver.hpp"
#if HEAT2D_HAVE_CUDA
#include "gpu_solver.hpp"
#endif
#include <climits>
#include <crown/stop_signal.hpp>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void usage(const char* program, const std::string& problem) {
  std::fprintf(stderr,
               "heat2d: %s\nusage: mpirun -np P %s [--n N] [--iterations K] [--mesh RxC] "
               "[--no-overlap] [--png FILE] [--controller] [--checkpoint-every N] "
               "[--checkpoint-dir DIR] [--keep N] [--resume] [--gpu]\n",
               problem.c_str(), program);
  std::exit(2);
}

std::size_t number(const char* program, const char* flag, const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (!*text || *end || v == 0 || v > INT_MAX)
    usage(program, std::string(flag) + " needs a number from 1 to " + std::to_string(INT_MAX));
  return static_cast<std::size_t>(v);
}

void print_run(const heat2d::options& o, int ranks, const char* how) {
  const auto [rows, cols] = heat2d::decomposition(o, ranks);
  std::printf("heat2d %zu x %zu, %d iterations on a %dx%d mesh%s%s\n", o.n, o.n, o.iterations, rows,
              cols, how, o.overlap ? " (halo exchange overlapped)" : "");
}

double mlups(const heat2d::options& o, double seconds) {
  return static_cast<double>(o.n) * static_cast<double>(o.n) * o.iterations / seconds / 1e6;
}

void write_png(const std::string& png, const heat2d::options& o, const heat2d::result& r) {
  if (png.empty()) return;
  heat2d::write_heatmap_png(png, r.field, o.n, o.n, 0.0, 1.0);
  std::printf("wrote %s\n", png.c_str());
}

/// Rank 0 drives the solver on the others; the SPMD solver runs there too, first.
int from_controller(crown::runtime& rt, const heat2d::options& o, const std::string& png) {
  return rt.control([&](crown::controller& c) {
    const crown::proc_mesh workers = c.workers();
    (void)heat2d::decomposition(o, workers.mesh().size()); // refused here, not by every worker
    const heat2d::result spmd = heat2d::solve_spmd_on(workers, o, false);
    const heat2d::result r = heat2d::solve_from_controller(workers, o, !png.empty());
    print_run(o, workers.mesh().size(), " of workers, driven from the controller");
    std::printf("time %.4f s, %.1f MLUP/s; SPMD on the same workers %.4f s, %.1f MLUP/s; "
                "ratio %.2f\n",
                r.seconds, mlups(o, r.seconds), spmd.seconds, mlups(o, spmd.seconds),
                spmd.seconds / r.seconds);
    std::printf("checksum %.17g\nspmd checksum %.17g\n", r.checksum, spmd.checksum);
    write_png(png, o, r);
  });
}

} // namespace

int main(int argc, char** argv) {
  // Before the runtime: a stop signal during start-up must not end a run that checkpoints.
  std::optional<crown::stop_signals> stop;
  try {
    for (int i = 1; i < argc; ++i)
      if (std::string_view(argv[i]) == "--checkpoint-every") stop.emplace();
  } catch (const crown::error& e) { // CROWN_STOP_GRACE: every rank reads the same value
    std::fprintf(stderr, "heat2d: %s\n", e.what());
    return 2;
  }
  crown::runtime rt(argc, argv);
  heat2d::options o;
  std::string png;
  bool controller = false, gpu = false;
  heat2d::checkpointing ck;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--n") {
      o.n = number(argv[0], "--n", next), ++i;
    } else if (a == "--iterations") {
      o.iterations = static_cast<int>(number(argv[0], "--iterations", next)), ++i;
    } else if (a == "--mesh") {
      if (std::sscanf(next, "%dx%d", &o.rows, &o.cols) != 2 || o.rows < 1 || o.cols < 1)
        usage(argv[0], "--mesh needs ROWSxCOLS, e.g. 2x2");
      ++i;
    } else if (a == "--no-overlap") {
      o.overlap = false;
    } else if (a == "--checkpoint-every") {
      ck.every = static_cast<int>(number(argv[0], "--checkpoint-every", next)), ++i;
    } else if (a == "--keep") {
      ck.keep = static_cast<int>(number(argv[0], "--keep", next)), ++i;
    } else if (a == "--checkpoint-dir") {
      ck.dir = next, ++i;
      if (ck.dir.empty()) usage(argv[0], "--checkpoint-dir needs a directory");
    } else if (a == "--resume") {
      ck.resume = true;
    } else if (a == "--controller") {
      controller = true;
    } else if (a == "--gpu") {
      gpu = true;
    } else if (a == "--png") {
      png = next, ++i;
      if (png.empty()) usage(argv[0], "--png needs a file name");
    } else {
      usage(argv[0], "unknown option " + std::string(a));
    }
  }
  if (controller && (ck.every > 0 || ck.resume))
    usage(argv[0], "--checkpoint-every and --resume work without --controller");
  if (controller && gpu) usage(argv[0], "--gpu works without --controller");
#if !HEAT2D_HAVE_CUDA
  if (gpu)
    usage(argv[0], "--gpu: this crown-heat2d was built without CUDA (no CUDA toolkit was "
                   "found when it was configured)");
#endif
  if (controller) return from_controller(rt, o, png); // failures are logged by control
  if (gpu) o.overlap = false;                         // the GPU path exchanges, then updates
  try {
    const heat2d::result r = [&] {
#if HEAT2D_HAVE_CUDA
      if (gpu)
        return heat2d::solve_gpu(crown::world(), o, !png.empty(), ck, stop ? &*stop : nullptr);
#endif
      return heat2d::solve(crown::world(), o, !png.empty(), ck, stop ? &*stop : nullptr);
    }();
    if (r.stopped > 0) {
      if (crown::world().rank() == 0)
        std::printf("heat2d: %s: checkpointed after iteration %d in %s; stopping (exit %d), "
                    "--resume continues\n",
                    crown::stop_signals::received() ? crown::stop_signals::signal_name()
                                                    : "a stop signal on another rank",
                    r.stopped, ck.dir.c_str(), crown::stop_exit_status);
      return crown::stop_exit_status;
    }
    if (crown::world().rank() == 0) {
      print_run(o, crown::world().size(), gpu ? " of GPUs (device coarrays)" : "");
      heat2d::options run = o; // after --resume, the iterations this run made
      run.iterations -= r.first;
      std::printf("time %.4f s, %.1f MLUP/s\n", r.seconds, mlups(run, r.seconds));
      std::printf("checksum %.17g\n", r.checksum);
      write_png(png, o, r);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "heat2d: %s\n", e.what());
    return 1;
  }
  return 0;
}
