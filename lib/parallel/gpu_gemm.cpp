// cuBLAS for crown::parallel's GEMMs (gpu_gemm.hpp), decided once per process.
#include "gpu_gemm.hpp"
#include <atomic>
#include <crown/build_config.hpp>
#include <crown/config.hpp>
#include <crown/detail/device_heap.hpp>
#include <crown/error.hpp>
#include <cstdio>
#include <memory>
#include <mutex>
#include <type_traits>
#if CROWN_HAVE_CUBLAS
#include "../gpu/cuda_error.hpp"
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif

namespace crown::parallel::detail {
namespace {

#if CROWN_HAVE_CUBLAS
using crown::detail::device_guard; // lib/gpu's: CUDA errors and the current device, one way

void check(cudaError_t rc, const std::string& what) {
  crown::detail::check_cuda(rc, "cuBLAS GEMM: " + what);
}

void check(cublasStatus_t rc, const std::string& what) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    throw state_error("cuBLAS GEMM: " + what, std::string(cublasGetStatusName(rc)) + " (" +
                                                  cublasGetStatusString(rc) + ")");
}

/// Device memory that grows (RAII).
class device_buffer {
public:
  device_buffer() = default;
  ~device_buffer() {
    if (p_) (void)cudaFree(p_);
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  void reset() noexcept {
    if (p_) (void)cudaFree(p_);
    p_ = nullptr;
    size_ = 0;
  }
  void* at_least(std::size_t bytes) {
    if (bytes <= size_) return p_;
    reset();
    check(cudaMalloc(&p_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    size_ = bytes;
    return p_;
  }

private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

/// cuBLAS on one GPU: a handle, a stream, and the operands' device copies.
class cublas_engine {
public:
  explicit cublas_engine(int device) : device_(device) {
    const device_guard on(device);
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    try {
      check(cublasCreate(&handle_), "cublasCreate");
      check(cublasSetStream(handle_, stream_), "cublasSetStream");
    } catch (...) {
      if (handle_) (void)cublasDestroy(handle_);
      (void)cudaStreamDestroy(stream_);
      throw;
    }
  }
  ~cublas_engine() {
    const device_guard on(device_);
    (void)cublasDestroy(handle_);
    (void)cudaStreamDestroy(stream_);
  }
  cublas_engine(const cublas_engine&) = delete;
  cublas_engine& operator=(const cublas_engine&) = delete;

  /// Row-major C = alpha op(A) op(B) + beta C is column-major Cᵀ = alpha op(B)ᵀ op(A)ᵀ + beta
  /// Cᵀ over the same memory: cuBLAS gets B before A and N before M.
  /// `c_written` turns true once copying C back has begun: from then on a failure may
  /// leave C partly overwritten.
  template <typename T>
  void gemm(bool ta, bool tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
            int ldb, T beta, T* C, int ldc, bool& c_written) {
    const std::lock_guard lock(mutex_);
    const device_guard on(device_);
    // Elements each operand spans in memory (row-major rows of its leading dimension).
    const auto span = [](int rows, int cols, int ld) {
      return rows == 0 || cols == 0
                 ? std::size_t{0}
                 : (static_cast<std::size_t>(rows) - 1) * static_cast<std::size_t>(ld) +
                       static_cast<std::size_t>(cols);
    };
    const std::size_t a = ta ? span(K, M, lda) : span(M, K, lda);
    const std::size_t b = tb ? span(N, K, ldb) : span(K, N, ldb);
    T* da = static_cast<T*>(a_.at_least(a * sizeof(T)));
    T* db = static_cast<T*>(b_.at_least(b * sizeof(T)));
    T* dc = static_cast<T*>(c_.at_least(span(M, N, ldc) * sizeof(T)));
    const auto to = cudaMemcpyHostToDevice;
    // A failure past the first copy returns only once the copies before it are done:
    // they read the caller's memory (asynchronously where it is pinned).
    const crown::detail::drain_on_failure drain(stream_);
    check(cudaMemcpyAsync(da, A, a * sizeof(T), to, stream_), "copying A to the GPU");
    check(cudaMemcpyAsync(db, B, b * sizeof(T), to, stream_), "copying B to the GPU");
    // C's rows only: the padding between them (ldc > N) is the caller's, never written.
    const std::size_t pitch = static_cast<std::size_t>(ldc) * sizeof(T);
    const std::size_t row = static_cast<std::size_t>(N) * sizeof(T);
    if (beta != T(0))
      check(cudaMemcpy2DAsync(dc, pitch, C, pitch, row, static_cast<std::size_t>(M), to, stream_),
            "copying C to the GPU");
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const std::string what = std::string(ta ? "gemm(A transposed, " : "gemm(") +
                             (tb ? "B transposed, " : "") + std::to_string(M) + " x " +
                             std::to_string(N) + " x " + std::to_string(K) + ", lda " +
                             std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " +
                             std::to_string(ldc) + ") on GPU " + std::to_string(device_);
    if constexpr (std::is_same_v<T, float>)
      check(cublasSgemm(handle_, op_b, op_a, N, M, K, &alpha, db, ldb, da, lda, &beta, dc, ldc),
            what);
    else
      check(cublasDgemm(handle_, op_b, op_a, N, M, K, &alpha, db, ldb, da, lda, &beta, dc, ldc),
            what);
    c_written = true;
    check(cudaMemcpy2DAsync(C, pitch, dc, pitch, row, static_cast<std::size_t>(M),
                            cudaMemcpyDeviceToHost, stream_),
          "copying C back");
    check(cudaStreamSynchronize(stream_), what + ": cudaStreamSynchronize");
  }

  /// The operands' device copies, freed (after a failure: out of memory, say).
  void release() {
    const std::lock_guard lock(mutex_);
    const device_guard on(device_);
    a_.reset();
    b_.reset();
    c_.reset();
  }

private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  std::mutex mutex_;
  device_buffer a_, b_, c_;
};
#else
class cublas_engine {
public:
  template <typename T>
  void gemm(bool, bool, int, int, int, T, const T*, int, const T*, int, T, T*, int, bool&) {}
  void release() {}
};
#endif

struct decision {
  std::unique_ptr<cublas_engine> engine; ///< null: the CPU
  std::uint64_t min_work = 0;
  bool may_fall_back = false; ///< auto: a GEMM failing on the GPU sends the rest to OpenBLAS
  std::string why;
};

/// Set once a GEMM failed on the GPU under auto: OpenBLAS from then on.
struct fallback {
  std::atomic<bool> taken{false};
  std::mutex mutex;
  std::string why; ///< under mutex
};

fallback& fell_back() {
  static fallback f;
  return f;
}

/// The GPU cuBLAS would use, or -1 with `why` set.
int usable_gpu(std::string& why) {
#if CROWN_HAVE_CUBLAS
  int count = 0;
  if (const cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    why = "no GPU is visible (cudaGetDeviceCount: " +
          std::string(rc == cudaSuccess ? "0 devices" : cudaGetErrorName(rc)) + ")";
    return -1;
  }
  // The device heap's GPU (local rank % GPUs) where there is one, else the current one.
  int device = crown::detail::device_ordinal();
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) device = 0;
  return device;
#else
  why = CROWN_HAVE_CUDA ? "this Crown was built without cuBLAS (the CUDA toolkit has no libcublas)"
                        : "this Crown was built without CUDA";
  return -1;
#endif
}

decision decide() {
  decision d;
  const gemm_choice choice = config::from_environment().gemm;
  if (choice == gemm_choice::cpu) {
    d.why = "cpu: CROWN_GEMM=cpu";
    return d;
  }
  std::string why;
  const int device = usable_gpu(why);
  if (device < 0) {
    if (choice == gemm_choice::cublas) throw state_error("CROWN_GEMM=cublas", why);
    d.why = "cpu: " + why;
    return d;
  }
#if CROWN_HAVE_CUBLAS
  try {
    d.engine = std::make_unique<cublas_engine>(device);
  } catch (const error& e) {
    if (choice == gemm_choice::cublas) throw;
    d.why = std::string("cpu: cuBLAS failed to start: ") + e.what();
    return d;
  }
  cudaDeviceProp p{};
  const bool named = cudaGetDeviceProperties(&p, device) == cudaSuccess;
  d.min_work = choice == gemm_choice::cublas ? 0 : gpu_gemm_min_work;
  d.may_fall_back = choice == gemm_choice::automatic;
  d.why = "cublas on GPU " + std::to_string(device) +
          (named ? " (" + std::string(p.name) + ")" : "") +
          (d.min_work ? " from 2^27 multiply-adds, OpenBLAS below"
                      : " for every GEMM (CROWN_GEMM=cublas)");
#endif
  return d;
}

decision& current() {
  // A throw leaves it undecided: the next call throws again. Never destroyed: at exit
  // the CUDA runtime may be gone before a static's destructor would run.
  static decision* d = new decision(decide());
  return *d;
}

template <typename T>
bool run(bool ta, bool tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B, int ldb,
         T beta, T* C, int ldc) {
  decision& d = current();
  fallback& f = fell_back();
  if (!d.engine || f.taken.load(std::memory_order_relaxed) || !gpu_gemm_wanted(d.min_work, M, N, K))
    return false;
  bool c_written = false;
  try {
    d.engine->gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, c_written);
  } catch (const error& e) {
    if (!d.may_fall_back) throw;
    {
      // Later GEMMs go to OpenBLAS even when this one cannot: after a sticky CUDA error
      // the GPU would fail them all.
      const std::lock_guard lock(f.mutex);
      if (!f.taken.exchange(true)) {
        f.why = std::string("cpu: cuBLAS failed at a GEMM: ") + e.what();
        std::fprintf(stderr, "crown: CROWN_GEMM=auto: %s; OpenBLAS from now on\n", e.what());
      }
    }
    try {
      d.engine->release();
    } catch (const error&) { // the memory is lost to a broken GPU either way
    }
    // OpenBLAS redoes the GEMM unless C, an input too where beta != 0, may be lost.
    if (c_written && beta != T(0)) throw;
    return false;
  }
  return true;
}

} // namespace

bool gpu_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  return run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

bool gpu_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
              const double* B, int ldb, double beta, double* C, int ldc) {
  return run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

std::string gemm_engine() {
  const std::string& why = current().why;
  fallback& f = fell_back();
  const std::lock_guard lock(f.mutex);
  return f.taken ? f.why : why;
}

} // namespace crown::parallel::detail
