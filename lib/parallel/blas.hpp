// lib/parallel/blas.hpp — the one file that includes cblas.h: row-major GEMM for float and
// double, on cuBLAS where CROWN_GEMM sends it there (gpu_gemm.hpp), else OpenBLAS.
#pragma once
#include "gpu_gemm.hpp"
#include <cblas.h>

namespace crown::parallel::detail {

/// C(M, N) = alpha · op(A) · op(B) + beta · C, row-major.
inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                 int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  if (gpu_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A,
                 int lda, const double* B, int ldb, double beta, double* C, int ldc) {
  if (gpu_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

} // namespace crown::parallel::detail
