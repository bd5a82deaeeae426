// crown-bench: Crown's figures beside baselines measured in the same run, as CSV.
//   mpirun -np 2 crown-bench onesided [--smoke] [--shmem FILE]
//   mpirun -np N crown-bench actors [--smoke]          (N >= 2: rank 0 controls)
//   mpirun -np N crown-bench apps [--smoke]            (heat2d and transpose vs plain MPI)
//   mpirun -np N crown-bench engine [--smoke]          (heat2d from the controller vs SPMD)
//   mpirun -np 2 -x CROWN_FAKE_HOSTS=2 crown-bench progress [--smoke]
//                                   (overlap, idle CPU, latency with the progress thread)
//   crown-bench fortran --crown FILE --baseline FILE   (coarray Fortran: scripts/bench-fortran)
//   mpirun -np 2 crown-bench gpu [--smoke] [--nvshmem FILE] [--mps]
//                                   (device coarrays: scripts/gpu-check; --mps: only the
//                                   kernel flag hand-off, run again under MPS)
//   mpirun -np 2 crown-bench parallel [--smoke] [--torch FILE] (DDP training vs MPI and PyTorch)
//   mpirun -np N crown-bench checkpoint [--smoke]      (checkpoint write/read vs dd)
//   crown-bench plan [--smoke]    (crown-plan's search time; `parallel` prints it too)
// Each figure is the median of 11 batches (3 with --smoke). ratio > 1 means Crown is
// better (baseline time / Crown time, or Crown rate / baseline rate). --shmem reads
// crown-shmem-baseline's figures (run just before by scripts/bench) and adds an
// OpenSHMEM line beside every figure it has. `fortran` prints crown-caf-bench's figures
// on libcrown_caf beside the same program's on OpenCoarrays, from the files named.
#include "bench.hpp"
#include <crown/crown.hpp>
#include <stdexcept>
#include <string_view>

int main(int argc, char** argv) {
  crown_bench::options o;
  const std::string_view group = argc > 1 ? argv[1] : "";
  bool usage = group != "onesided" && group != "actors" && group != "apps" && group != "fortran" &&
               group != "progress" && group != "gpu" && group != "engine" && group != "parallel" &&
               group != "checkpoint" && group != "plan";
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--smoke" && group != "fortran") {
      o.smoke = true;
      o.batches = 3;
    } else if (a == "--shmem" && i + 1 < argc && group == "onesided") {
      o.shmem_file = argv[++i];
    } else if (a == "--torch" && i + 1 < argc && group == "parallel") {
      o.torch_file = argv[++i];
    } else if (a == "--nvshmem" && i + 1 < argc && group == "gpu") {
      o.nvshmem_file = argv[++i];
    } else if (a == "--mps" && group == "gpu") {
      o.mps = true;
    } else if (a == "--crown" && i + 1 < argc && group == "fortran") {
      o.crown_file = argv[++i];
    } else if (a == "--baseline" && i + 1 < argc && group == "fortran") {
      o.baseline_file = argv[++i];
    } else {
      usage = true;
    }
  }
  if (group == "fortran" && (o.crown_file.empty() || o.baseline_file.empty())) usage = true;
  if (usage) {
    std::fprintf(
        stderr,
        "usage: mpirun -np 2 %s onesided [--smoke] [--shmem FILE]\n"
        "       mpirun -np N %s actors [--smoke]\n"
        "       mpirun -np N %s apps [--smoke]\n"
        "       mpirun -np N %s engine [--smoke]\n"
        "       mpirun -np 2 -x CROWN_FAKE_HOSTS=2 %s progress [--smoke]\n"
        "       %s fortran --crown FILE --baseline FILE   (scripts/bench-fortran runs it)\n"
        "       mpirun -np 2 %s gpu [--smoke] [--nvshmem FILE] [--mps]\n"
        "       mpirun -np N %s checkpoint [--smoke]\n"
        "       mpirun -np 2 %s parallel [--smoke] [--torch FILE]\n"
        "       %s plan [--smoke]\n",
        argv[0], argv[0], argv[0], argv[0], argv[0], argv[0], argv[0], argv[0], argv[0], argv[0]);
    return 2;
  }
#if CROWN_BENCH_PLAN
  if (group == "plan") { // serial: no MPI
    try {
      crown_bench::print_header();
      crown_bench::plan(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crown-bench plan: %s\n", e.what());
      return 1;
    }
    return 0;
  }
#endif
  if (group == "fortran") { // reads two files: no MPI
    try {
      crown_bench::fortran(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crown-bench fortran: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  try {
    crown::runtime rt(argc, argv);
    if (group == "onesided")
      crown_bench::onesided(o);
    else if (group == "actors")
      crown_bench::actors(o);
    else if (group == "engine")
      crown_bench::engine(o);
    else if (group == "progress")
      crown_bench::progress(o);
    else if (group == "checkpoint")
      crown_bench::checkpoint(o);
    else if (group == "parallel")
#if CROWN_BENCH_PARALLEL
    {
      crown_bench::parallel(o);
#if CROWN_BENCH_PLAN
      if (rt.rank() == 0) crown_bench::plan(o); // the planner's lines (serial)
#endif
    }
#else
      throw crown::state_error("crown-bench parallel",
                               "built without OpenBLAS (libcrown_parallel)");
#endif
    else if (group == "gpu")
#if CROWN_HAVE_CUDA
      crown_bench::gpu(o);
#else
      throw crown::state_error("crown-bench gpu", "this Crown was built without CUDA");
#endif
    else
      crown_bench::apps(o);
  } catch (const crown::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    int finalized = 0; // the runtime's destructor may have finalised MPI already
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Abort(MPI_COMM_WORLD, 1); // the others may wait in a collective
    return 1;
  }
  return 0;
}
