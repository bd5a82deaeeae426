// crown-nvshmem-baseline: NVSHMEM's figures for `crown-bench gpu --nvshmem FILE`, from
// the same machine and run (scripts/gpu-check). 2 PEs, PE 0 drives, PE 1 is the target.
// Bootstrap: NVSHMEM's unique id, made on rank 0 and broadcast over MPI. Prints
// "nvshmem,<op>,<bytes>,<seconds per operation>" lines (the medians of 5 batches):
//   put_latency/get_latency 8 B..4 KiB   nvshmem_putmem/getmem + nvshmem_quiet
//   put_bw/get_bw 4 KiB..256 MiB         the same, by size
//   kernel_put_bw_one_block 64 MiB        one block: nvshmemx_putmem_block + quiet
// Built only where NVSHMEM's headers are found (-DCROWN_NVSHMEM_ROOT=...). Written
// without NVSHMEM or a GPU at hand: never compiled or run here.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nvshmem.h>
#include <nvshmemx.h>
#include <string_view>
#include <utility>
#include <vector>

namespace {

void check(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) return;
  std::fprintf(stderr, "crown-nvshmem-baseline: %s: %s\n", what, cudaGetErrorString(rc));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

__global__ void put_block(char* dst, const char* src, std::size_t n, int pe) {
  nvshmemx_putmem_block(dst, src, n, pe);
  if (threadIdx.x == 0) nvshmem_quiet();
}

template <typename F>
double median_seconds(int ops, F&& f) {
  std::vector<double> t;
  f();
  for (int b = 0; b < 5; ++b) {
    const double start = MPI_Wtime();
    for (int i = 0; i < ops; ++i) f();
    t.push_back((MPI_Wtime() - start) / ops);
  }
  std::nth_element(t.begin(), t.begin() + 2, t.end());
  return t[2];
}

} // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const bool smoke = argc > 1 && std::string_view(argv[1]) == "--smoke";
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "crown-nvshmem-baseline: run it on exactly 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  check(cudaSetDevice(rank % devices), "cudaSetDevice");

  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0) nvshmemx_get_uniqueid(&id);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  nvshmemx_set_attr_uniqueid_args(rank, size, &id, &attr);
  nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);

  const std::size_t max_bytes = smoke ? (std::size_t{4} << 20) : (std::size_t{256} << 20);
  char* sym = static_cast<char*>(nvshmem_malloc(max_bytes));
  char* local = nullptr;
  check(cudaMalloc(&local, max_bytes), "cudaMalloc");
  check(cudaMemset(local, 1, max_bytes), "cudaMemset");
  const int ops = smoke ? 5 : 20;

  if (rank == 0) {
    std::vector<std::pair<const char*, std::size_t>> sizes; // (op suffix, bytes)
    for (const std::size_t b : {8, 64, 512, 4096}) sizes.emplace_back("latency", b);
    for (std::size_t b = 4096; b <= max_bytes; b *= (smoke ? 32 : 4)) sizes.emplace_back("bw", b);
    for (const bool put : {true, false})
      for (const auto& [kind, b] : sizes) {
        const double s = median_seconds(ops, [&, b = b] {
          if (put)
            nvshmem_putmem(sym, local, b, 1);
          else
            nvshmem_getmem(local, sym, b, 1);
          nvshmem_quiet();
        });
        std::printf("nvshmem,%s_%s,%zu,%.9g\n", put ? "put" : "get", kind, b, s);
      }
    const std::size_t block = smoke ? (std::size_t{4} << 20) : (std::size_t{64} << 20);
    const double s = median_seconds(smoke ? 3 : 10, [&] {
      put_block<<<1, 1024>>>(sym, local, block, 1);
      check(cudaDeviceSynchronize(), "put_block");
    });
    std::printf("nvshmem,kernel_put_bw_one_block,%zu,%.9g\n", block, s);
    std::fflush(stdout);
  }
  // PE 1 waits on the CPU while PE 0 times, as Crown's target does: NVSHMEM's barrier
  // runs on the GPU and, without MPS, would take turns with PE 0's kernels.
  MPI_Barrier(MPI_COMM_WORLD);
  nvshmem_barrier_all();
  cudaFree(local);
  nvshmem_free(sym);
  nvshmem_finalize();
  MPI_Finalize();
  return 0;
}
