// lib/parallel/gpu_gemm.hpp — the training stack's GEMMs on cuBLAS (CROWN_GEMM): where
// Crown was built with CUDA, a GPU is visible and the product is large enough to pay
// for copying its operands there and back. No CUDA header here: blas.hpp includes it.
#pragma once
#include <cstdint>
#include <string>

namespace crown::parallel::detail {

/// C(M, N) = alpha · op(A) · op(B) + beta · C (row-major, host memory) on cuBLAS, and
/// true; false when this GEMM belongs on the CPU (CROWN_GEMM=cpu, no GPU, or auto and
/// fewer than gpu_gemm_min_work multiply-adds). Decided at the first call from
/// CROWN_GEMM; CROWN_GEMM=cublas where cuBLAS cannot run throws state_error saying why.
/// Under auto a GEMM that fails on the GPU (out of device memory, say) is said once on
/// stderr, redone on OpenBLAS, and sends this process's later GEMMs there too (the
/// device copies are freed); it throws under cublas, and under auto where beta != 0 and
/// C may be partly overwritten already (later GEMMs still go to OpenBLAS).
bool gpu_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);
bool gpu_gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A,
              int lda, const double* B, int ldb, double beta, double* C, int ldc);

/// Under CROWN_GEMM=auto, the products (M·N·K multiply-adds) from which cuBLAS runs them.
inline constexpr std::uint64_t gpu_gemm_min_work = std::uint64_t{1} << 27;

/// Whether a GEMM of M·N·K multiply-adds goes to cuBLAS when cuBLAS takes products from
/// `min_work` on (0: every one; CROWN_GEMM=cublas). Empty products stay on the CPU.
constexpr bool gpu_gemm_wanted(std::uint64_t min_work, int M, int N, int K) {
  return M > 0 && N > 0 && K > 0 &&
         static_cast<std::uint64_t>(M) * static_cast<std::uint64_t>(N) *
                 static_cast<std::uint64_t>(K) >=
             min_work;
}

/// Where GEMMs run here and why, one line ("cublas on GPU 0 (NVIDIA H200) from 2^27
/// multiply-adds, OpenBLAS below", "cpu: no GPU is visible (cudaGetDeviceCount: ...)",
/// "cpu: cuBLAS failed at a GEMM: ..."); decides as the first GEMM would.
std::string gemm_engine();

} // namespace crown::parallel::detail
