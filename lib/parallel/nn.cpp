// The layers of the small GPT (include/crown/parallel/nn.hpp), for float and double.
#include "blas.hpp"
#include <algorithm>
#include <cmath>
#include <crown/parallel/nn.hpp>

namespace crown::parallel::nn {

using detail::gemm;

template <typename T>
void linear_forward(std::span<T> out, std::span<const T> inp, std::span<const T> w,
                    std::span<const T> bias, int N, int C, int OC) {
  gemm(false, true, N, OC, C, T(1), inp.data(), C, w.data(), C, T(0), out.data(), OC);
  if (bias.empty()) return;
  for (int n = 0; n < N; ++n) {
    T* row = out.data() + std::size_t(n) * OC;
    for (int o = 0; o < OC; ++o) row[o] += bias[o];
  }
}

template <typename T>
void linear_backward(std::span<T> dinp, std::span<T> dw, std::span<T> dbias,
                     std::span<const T> dout, std::span<const T> inp, std::span<const T> w, int N,
                     int C, int OC) {
  if (!dinp.empty())
    gemm(false, false, N, C, OC, T(1), dout.data(), OC, w.data(), C, T(1), dinp.data(), C);
  gemm(true, false, OC, C, N, T(1), dout.data(), OC, inp.data(), C, T(1), dw.data(), C);
  if (dbias.empty()) return;
  for (int n = 0; n < N; ++n) {
    const T* row = dout.data() + std::size_t(n) * OC;
    for (int o = 0; o < OC; ++o) dbias[o] += row[o];
  }
}

template <typename T>
void embedding_forward(std::span<T> out, std::span<const int> tokens, std::span<const T> wte,
                       std::span<const T> wpe, int B, int T_, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T_; ++t) {
      const std::size_t bt = std::size_t(b) * T_ + t;
      const T* e = wte.data() + std::size_t(tokens[bt]) * C;
      const T* p = wpe.data() + std::size_t(t) * C;
      T* o = out.data() + bt * C;
      for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
    }
}

template <typename T>
void embedding_backward(std::span<T> dwte, std::span<T> dwpe, std::span<const T> dout,
                        std::span<const int> tokens, int B, int T_, int C) {
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T_; ++t) {
      const std::size_t bt = std::size_t(b) * T_ + t;
      const T* d = dout.data() + bt * C;
      T* de = dwte.data() + std::size_t(tokens[bt]) * C;
      T* dp = dwpe.data() + std::size_t(t) * C;
      for (int c = 0; c < C; ++c) {
        de[c] += d[c];
        dp[c] += d[c];
      }
    }
}

template <typename T>
void layer_norm_forward(std::span<T> out, std::span<T> mean, std::span<T> rstd,
                        std::span<const T> inp, std::span<const T> w, std::span<const T> b, int N,
                        int C) {
  constexpr T eps = T(1e-5);
  for (int n = 0; n < N; ++n) {
    const T* x = inp.data() + std::size_t(n) * C;
    T m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= T(C);
    T v = 0;
    for (int c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    v /= T(C);
    const T s = T(1) / std::sqrt(v + eps);
    T* o = out.data() + std::size_t(n) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename T>
void layer_norm_backward(std::span<T> dinp, std::span<T> dw, std::span<T> db,
                         std::span<const T> dout, std::span<const T> inp, std::span<const T> w,
                         std::span<const T> mean, std::span<const T> rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const T* x = inp.data() + std::size_t(n) * C;
    const T* d = dout.data() + std::size_t(n) * C;
    T* dx = dinp.data() + std::size_t(n) * C;
    const T m = mean[n], s = rstd[n];
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = 0; c < C; ++c) {
      const T norm = (x[c] - m) * s, dnorm = w[c] * d[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= T(C);
    dnorm_norm_mean /= T(C);
    for (int c = 0; c < C; ++c) {
      const T norm = (x[c] - m) * s, dnorm = w[c] * d[c];
      db[c] += d[c];
      dw[c] += norm * d[c];
      dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

namespace {
template <typename T>
constexpr T gelu_scale = T(0.7978845608028654); // sqrt(2 / pi)

// tanh for GELU. float: an odd rational approximation (the minimax form Eigen uses for
// float tanh), branch-free so that the loops vectorise; within 3.1e-7 of std::tanh, 5 float ulps
// near 1 (test parallel.nn). double keeps std::tanh: it is the precision parity is checked in.
inline float gelu_tanh(float x) {
  x = std::clamp(x, -7.90531110763549805f, 7.90531110763549805f);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = x2 * p + 2.00018790482477e-13f;
  p = x2 * p - 8.60467152213735e-11f;
  p = x2 * p + 5.12229709037114e-08f;
  p = x2 * p + 1.48572235717979e-05f;
  p = x2 * p + 6.37261928875436e-04f;
  p = x2 * p + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = x2 * q + 1.18534705686654e-04f;
  q = x2 * q + 2.26843463243900e-03f;
  q = x2 * q + 4.89352518554385e-03f;
  return x * p / q;
}
inline double gelu_tanh(double x) { return std::tanh(x); }
} // namespace

template <typename T>
void gelu_forward(std::span<T> out, std::span<const T> inp) {
  for (std::size_t i = 0; i < inp.size(); ++i) {
    const T x = inp[i];
    out[i] = T(0.5) * x * (T(1) + gelu_tanh(gelu_scale<T> * (x + T(0.044715) * x * x * x)));
  }
}

template <typename T>
void gelu_backward(std::span<T> dinp, std::span<const T> inp, std::span<const T> dout) {
  for (std::size_t i = 0; i < inp.size(); ++i) {
    const T x = inp[i];
    const T u = gelu_scale<T> * (x + T(0.044715) * x * x * x);
    const T th = gelu_tanh(u), sech2 = T(1) - th * th;
    const T local =
        T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * gelu_scale<T> * (T(1) + T(0.134145) * x * x);
    dinp[i] += local * dout[i];
  }
}

template <typename T>
void attention_forward(std::span<T> out, std::span<T> att, std::span<const T> qkv, int B, int T_,
                       int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(hs));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const T* q = qkv.data() + std::size_t(b) * T_ * C3 + std::size_t(h) * hs;
      T* a = att.data() + (std::size_t(b) * NH + h) * T_ * T_;
      gemm(false, true, T_, T_, hs, scale, q, C3, q + C, C3, T(0), a, T_);
      for (int t = 0; t < T_; ++t) { // causal softmax of row t over t2 <= t
        T* row = a + std::size_t(t) * T_;
        const T mx = *std::max_element(row, row + t + 1);
        T sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) sum += row[t2] = std::exp(row[t2] - mx);
        const T inv = T(1) / sum;
        for (int t2 = 0; t2 <= t; ++t2) row[t2] *= inv;
        std::fill(row + t + 1, row + T_, T(0));
      }
      gemm(false, false, T_, hs, T_, T(1), a, T_, q + 2 * C, C3, T(0),
           out.data() + std::size_t(b) * T_ * C + std::size_t(h) * hs, C);
    }
}

template <typename T>
void attention_backward(std::span<T> dqkv, std::span<T> scratch, std::span<const T> dout,
                        std::span<const T> qkv, std::span<const T> att, int B, int T_, int C,
                        int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const T scale = T(1) / std::sqrt(T(hs));
  T* da = scratch.data();
  T* ds = scratch.data() + std::size_t(T_) * T_;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const std::size_t head = std::size_t(b) * T_ * C3 + std::size_t(h) * hs;
      const T* q = qkv.data() + head;
      T* dq = dqkv.data() + head;
      const T* a = att.data() + (std::size_t(b) * NH + h) * T_ * T_;
      const T* d = dout.data() + std::size_t(b) * T_ * C + std::size_t(h) * hs;
      gemm(false, true, T_, T_, hs, T(1), d, C, q + 2 * C, C3, T(0), da, T_); // dA = dout·vᵀ
      gemm(true, false, T_, hs, T_, T(1), a, T_, d, C, T(1), dq + 2 * C, C3); // dv += Aᵀ·dout
      for (int t = 0; t < T_; ++t) { // softmax backward, row by row
        const T* ar = a + std::size_t(t) * T_;
        const T* dar = da + std::size_t(t) * T_;
        T* dsr = ds + std::size_t(t) * T_;
        T dot = 0;
        for (int t2 = 0; t2 <= t; ++t2) dot += ar[t2] * dar[t2];
        for (int t2 = 0; t2 <= t; ++t2) dsr[t2] = ar[t2] * (dar[t2] - dot);
        std::fill(dsr + t + 1, dsr + T_, T(0));
      }
      gemm(false, false, T_, hs, T_, scale, ds, T_, q + C, C3, T(1), dq, C3); // dq += s·dS·k
      gemm(true, false, T_, hs, T_, scale, ds, T_, q, C3, T(1), dq + C, C3);  // dk += s·dSᵀ·q
    }
}

template <typename T>
T cross_entropy_forward(std::span<T> probs_from_logits, std::span<const int> targets, int N,
                        int V) {
  double loss = 0;
  for (int n = 0; n < N; ++n) {
    T* p = probs_from_logits.data() + std::size_t(n) * V;
    const T mx = *std::max_element(p, p + V);
    T sum = 0;
    for (int v = 0; v < V; ++v) sum += p[v] = std::exp(p[v] - mx);
    const T inv = T(1) / sum;
    for (int v = 0; v < V; ++v) p[v] *= inv;
    loss -= std::log(double(p[targets[n]]));
  }
  return T(loss / N);
}

template <typename T>
void cross_entropy_backward(std::span<T> probs_to_dlogits, std::span<const int> targets, int N,
                            int V, T scale) {
  for (int n = 0; n < N; ++n) {
    T* p = probs_to_dlogits.data() + std::size_t(n) * V;
    p[targets[n]] -= T(1);
    for (int v = 0; v < V; ++v) p[v] *= scale;
  }
}

template <typename T>
void residual_forward(std::span<T> out, std::span<const T> a, std::span<const T> b) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[i] + b[i];
}

float tanh_for_gelu(float x) { return gelu_tanh(x); }

void set_blas_threads(int threads) { openblas_set_num_threads(threads); }
const char* blas_description() { return openblas_get_config(); }

#define CROWN_NN_INSTANTIATE(T)                                                                    \
  template void linear_forward<T>(std::span<T>, std::span<const T>, std::span<const T>,            \
                                  std::span<const T>, int, int, int);                              \
  template void linear_backward<T>(std::span<T>, std::span<T>, std::span<T>, std::span<const T>,   \
                                   std::span<const T>, std::span<const T>, int, int, int);         \
  template void embedding_forward<T>(std::span<T>, std::span<const int>, std::span<const T>,       \
                                     std::span<const T>, int, int, int);                           \
  template void embedding_backward<T>(std::span<T>, std::span<T>, std::span<const T>,              \
                                      std::span<const int>, int, int, int);                        \
  template void layer_norm_forward<T>(std::span<T>, std::span<T>, std::span<T>,                    \
                                      std::span<const T>, std::span<const T>, std::span<const T>,  \
                                      int, int);                                                   \
  template void layer_norm_backward<T>(std::span<T>, std::span<T>, std::span<T>,                   \
                                       std::span<const T>, std::span<const T>, std::span<const T>, \
                                       std::span<const T>, std::span<const T>, int, int);          \
  template void gelu_forward<T>(std::span<T>, std::span<const T>);                                 \
  template void gelu_backward<T>(std::span<T>, std::span<const T>, std::span<const T>);            \
  template void attention_forward<T>(std::span<T>, std::span<T>, std::span<const T>, int, int,     \
                                     int, int);                                                    \
  template void attention_backward<T>(std::span<T>, std::span<T>, std::span<const T>,              \
                                      std::span<const T>, std::span<const T>, int, int, int, int); \
  template T cross_entropy_forward<T>(std::span<T>, std::span<const int>, int, int);               \
  template void cross_entropy_backward<T>(std::span<T>, std::span<const int>, int, int, T);        \
  template void residual_forward<T>(std::span<T>, std::span<const T>, std::span<const T>);
CROWN_NN_INSTANTIATE(float)
CROWN_NN_INSTANTIATE(double)
#undef CROWN_NN_INSTANTIATE

} // namespace crown::parallel::nn
