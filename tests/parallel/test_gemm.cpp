// crown::parallel's GEMM dispatch (lib/parallel/blas.hpp, gpu_gemm.cpp): where CROWN_GEMM
// sends the products (the engine line, and the error of CROWN_GEMM=cublas without a GPU),
// and every transposition, leading dimension and beta against a serial reference on
// whichever engine runs here: OpenBLAS without a GPU, cuBLAS on the GPU machine. No MPI.
#define BOOST_TEST_MODULE gemm
#include <boost/test/included/unit_test.hpp>
#include <crown/build_config.hpp>
#include <crown/error.hpp>
#include <cstdlib>
#include <harness/crown_test.hpp>
#include <parallel/blas.hpp>
#include <random>
#include <runtime/gpu.hpp>
#include <string>
#include <vector>

namespace pd = crown::parallel::detail;

namespace {

std::string setting() {
  const char* v = std::getenv("CROWN_GEMM");
  return v ? v : "auto";
}

/// A build with cuBLAS and a GPU the CUDA runtime sees (libcrown's discovery, not the
/// dispatcher's own test).
bool gpu_here() { return CROWN_HAVE_CUBLAS && crown::detail::discover_gpus().count > 0; }

/// Under CROWN_GEMM=cublas without a GPU every GEMM throws (the first case checks that):
/// the cases that compute skip, saying so.
bool skipped_without_a_gpu() {
  if (setting() != "cublas" || gpu_here()) return false;
  BOOST_TEST_MESSAGE("skipped: CROWN_GEMM=cublas and no GPU is visible here");
  std::printf("skipped: CROWN_GEMM=cublas and no GPU is visible here\n");
  return true;
}

template <typename T>
struct problem {
  bool ta, tb;
  int M, N, K, lda, ldb, ldc;
  std::vector<T> A, B, C;
};

template <typename T>
problem<T> make(bool ta, bool tb, int M, int N, int K, int pad, unsigned seed) {
  problem<T> p{ta, tb, M, N, K, (ta ? M : K) + pad, (tb ? K : N) + pad, N + pad, {}, {}, {}};
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  auto fill = [&](std::vector<T>& v, std::size_t n) {
    v.resize(n);
    for (T& x : v) x = static_cast<T>(u(g));
  };
  fill(p.A, static_cast<std::size_t>(ta ? K : M) * p.lda);
  fill(p.B, static_cast<std::size_t>(tb ? N : K) * p.ldb);
  fill(p.C, static_cast<std::size_t>(M) * p.ldc);
  return p;
}

/// alpha op(A) op(B) + beta C in long double, element (i, j).
template <typename T>
long double reference(const problem<T>& p, T alpha, T beta, int i, int j) {
  long double s = 0;
  for (int k = 0; k < p.K; ++k) {
    const long double a = p.ta ? p.A[static_cast<std::size_t>(k) * p.lda + i]
                               : p.A[static_cast<std::size_t>(i) * p.lda + k];
    const long double b = p.tb ? p.B[static_cast<std::size_t>(j) * p.ldb + k]
                               : p.B[static_cast<std::size_t>(k) * p.ldb + j];
    s += a * b;
  }
  return alpha * s + beta * static_cast<long double>(p.C[static_cast<std::size_t>(i) * p.ldc + j]);
}

/// Runs the dispatcher on `p` and checks every element against the reference, and that
/// the padding of C's rows is untouched.
template <typename T>
void check(problem<T> p, T alpha, T beta, double tolerance) {
  const std::vector<T> before = p.C;
  pd::gemm(p.ta, p.tb, p.M, p.N, p.K, alpha, p.A.data(), p.lda, p.B.data(), p.ldb, beta, p.C.data(),
           p.ldc);
  problem<T> q = p;
  q.C = before;
  double worst = 0;
  bool padding_kept = true;
  for (int i = 0; i < p.M; ++i)
    for (int j = 0; j < p.ldc; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * p.ldc + j;
      if (j >= p.N) {
        padding_kept = padding_kept && p.C[at] == before[at];
        continue;
      }
      const long double r = reference(q, alpha, beta, i, j);
      const double err = static_cast<double>(std::abs(p.C[at] - r) / (1 + std::abs(r)));
      worst = std::max(worst, err);
    }
  BOOST_TEST_INFO("ta " << p.ta << " tb " << p.tb << " " << p.M << "x" << p.N << "x" << p.K
                        << " beta " << beta << ": worst relative error " << worst);
  BOOST_TEST(worst <= tolerance);
  BOOST_TEST(padding_kept);
}

} // namespace

BOOST_AUTO_TEST_CASE(the_engine_line_says_where_gemms_run_and_why) {
  const std::string s = setting();
  if (s == "cublas" && !gpu_here()) {
    const std::string m = crown_test::what_of<crown::state_error>([] { (void)pd::gemm_engine(); });
    BOOST_TEST_INFO(m);
    BOOST_TEST(m.starts_with("crown::state_error: rank ?: CROWN_GEMM=cublas: "));
    BOOST_TEST((m.find("no GPU is visible (cudaGetDeviceCount: ") != std::string::npos ||
                m.find("this Crown was built without CUDA") != std::string::npos ||
                m.find("this Crown was built without cuBLAS") != std::string::npos));
    // A GEMM says the same: nothing runs on the CPU behind the setting's back.
    float a = 1, b = 2, c = 0;
    BOOST_CHECK_THROW(pd::gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1),
                      crown::state_error);
    return;
  }
  const std::string e = pd::gemm_engine();
  BOOST_TEST_MESSAGE("gemm engine: " << e);
  std::printf("gemm engine: %s\n", e.c_str());
  if (s == "cpu")
    BOOST_TEST(e == "cpu: CROWN_GEMM=cpu");
  else if (!gpu_here())
    BOOST_TEST((e.starts_with("cpu: no GPU is visible (cudaGetDeviceCount: ") ||
                e == "cpu: this Crown was built without CUDA" ||
                e.starts_with("cpu: this Crown was built without cuBLAS")));
  else if (s == "cublas")
    BOOST_TEST(
        (e.starts_with("cublas on GPU ") && e.ends_with("for every GEMM (CROWN_GEMM=cublas)")));
  else
    BOOST_TEST((e.starts_with("cublas on GPU ") &&
                e.ends_with("from 2^27 multiply-adds, OpenBLAS below")));
}

BOOST_AUTO_TEST_CASE(every_transposition_leading_dimension_and_beta_against_a_reference) {
  if (skipped_without_a_gpu()) return;
  unsigned seed = 1;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const int pad : {0, 3}) {
        check(make<float>(ta, tb, 37, 29, 41, pad, seed++), 0.75f, 0.0f, 2e-5);
        check(make<float>(ta, tb, 37, 29, 41, pad, seed++), 1.0f, 1.5f, 2e-5);
        check(make<double>(ta, tb, 17, 40, 23, pad, seed++), -1.25, 0.5, 1e-13);
      }
}

BOOST_AUTO_TEST_CASE(the_threshold_sends_products_from_2_to_the_27_multiply_adds) {
  BOOST_TEST(pd::gpu_gemm_min_work == 512ull * 512 * 512);
  BOOST_TEST(pd::gpu_gemm_wanted(pd::gpu_gemm_min_work, 512, 512, 512));
  BOOST_TEST(!pd::gpu_gemm_wanted(pd::gpu_gemm_min_work, 512, 512, 511));
  BOOST_TEST(pd::gpu_gemm_wanted(pd::gpu_gemm_min_work, 1 << 20, 1 << 7, 1)); // order-free
  BOOST_TEST(!pd::gpu_gemm_wanted(pd::gpu_gemm_min_work, 1 << 20, 1 << 7, 0));
  BOOST_TEST(pd::gpu_gemm_wanted(1 << 30, 1 << 15, 1 << 15, 1 << 15)); // no 32-bit overflow
  BOOST_TEST(pd::gpu_gemm_wanted(0, 1, 1, 1));                         // cublas: every GEMM
  BOOST_TEST(!pd::gpu_gemm_wanted(0, 0, 5, 5));                        // but no empty one
  BOOST_TEST(!pd::gpu_gemm_wanted(0, 5, -1, 5));
}

BOOST_AUTO_TEST_CASE(a_product_at_the_threshold_goes_where_the_setting_sends_it) {
  if (skipped_without_a_gpu()) return;
  // 512^3 = 2^27 multiply-adds: on cuBLAS under auto where a GPU is, and one row fewer on
  // OpenBLAS; every GEMM on cuBLAS under cublas, none under cpu. Right either way.
  const std::string s = setting();
  const bool gpu = gpu_here() && s != "cpu";
  for (const int M : {512, 511}) {
    problem<float> p = make<float>(false, true, M, 512, 512, 0, 99);
    const std::vector<float> before = p.C;
    const bool on_gpu = pd::gpu_gemm(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(),
                                     p.ldb, 0.0f, p.C.data(), p.ldc);
    BOOST_TEST_INFO(s << ", M " << M);
    BOOST_TEST(on_gpu == (gpu && (M == 512 || s == "cublas")));
    if (!on_gpu) BOOST_TEST((p.C == before)); // not run: left to OpenBLAS
    p.C = before;
    check(p, 1.0f, 0.0f, 1e-4);
  }
}
