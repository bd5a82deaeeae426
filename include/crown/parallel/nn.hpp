// include/crown/parallel/nn.hpp — the layers of a small GPT, each a forward/backward pair of
// plain functions over spans (karpathy/llm.c's shape). Only as much as small models need.
//
// Shapes are stated once per function: N rows (batch x time), C channels, OC output
// channels, B batch, T time, NH heads, V vocabulary. Tensors are row-major. Backward
// functions accumulate (+=) into every gradient they are given, parameters' and inputs'
// alike, so the caller zeroes what must start at zero. The math knows no mesh.
// Instantiated for float and double (lib/parallel/nn.cpp); GEMMs go through CBLAS.
#pragma once
#include <cstddef>
#include <span>

namespace crown::parallel::nn {

/// out(N, OC) = inp(N, C) · w(OC, C)ᵀ + bias(OC) (bias may be empty).
template <typename T>
void linear_forward(std::span<T> out, std::span<const T> inp, std::span<const T> w,
                    std::span<const T> bias, int N, int C, int OC);
/// dinp += dout · w, dw += doutᵀ · inp, dbias += column sums of dout (empty: none).
template <typename T>
void linear_backward(std::span<T> dinp, std::span<T> dw, std::span<T> dbias,
                     std::span<const T> dout, std::span<const T> inp, std::span<const T> w, int N,
                     int C, int OC);

/// out(B, T, C) = wte[token] + wpe[t].
template <typename T>
void embedding_forward(std::span<T> out, std::span<const int> tokens, std::span<const T> wte,
                       std::span<const T> wpe, int B, int T_, int C);
template <typename T>
void embedding_backward(std::span<T> dwte, std::span<T> dwpe, std::span<const T> dout,
                        std::span<const int> tokens, int B, int T_, int C);

/// Layer norm over C (eps 1e-5); saves mean and 1/std per row for backward.
template <typename T>
void layer_norm_forward(std::span<T> out, std::span<T> mean, std::span<T> rstd,
                        std::span<const T> inp, std::span<const T> w, std::span<const T> b, int N,
                        int C);
template <typename T>
void layer_norm_backward(std::span<T> dinp, std::span<T> dw, std::span<T> db,
                         std::span<const T> dout, std::span<const T> inp, std::span<const T> w,
                         std::span<const T> mean, std::span<const T> rstd, int N, int C);

/// GELU, tanh approximation (GPT-2's). In float, tanh itself is a rational approximation
/// within 3.1e-7 of std::tanh, so that the loop vectorises; in double, std::tanh.
template <typename T>
void gelu_forward(std::span<T> out, std::span<const T> inp);
template <typename T>
void gelu_backward(std::span<T> dinp, std::span<const T> inp, std::span<const T> dout);

/// Causal self-attention: qkv(B, T, 3C) holds queries, keys and values (heads of C/NH
/// channels each); out(B, T, C); att(B, NH, T, T) saves the softmax for backward.
template <typename T>
void attention_forward(std::span<T> out, std::span<T> att, std::span<const T> qkv, int B, int T_,
                       int C, int NH);
/// `scratch` holds 2·T·T elements.
template <typename T>
void attention_backward(std::span<T> dqkv, std::span<T> scratch, std::span<const T> dout,
                        std::span<const T> qkv, std::span<const T> att, int B, int T_, int C,
                        int NH);

/// Softmax of logits(N, V) in place into probabilities; returns the mean over the N rows
/// of -log p[target].
template <typename T>
T cross_entropy_forward(std::span<T> probs_from_logits, std::span<const int> targets, int N, int V);
/// Turns the probabilities into dlogits in place: (p - onehot(target)) · scale.
template <typename T>
void cross_entropy_backward(std::span<T> probs_to_dlogits, std::span<const int> targets, int N,
                            int V, T scale);

/// out = a + b, element-wise.
template <typename T>
void residual_forward(std::span<T> out, std::span<const T> a, std::span<const T> b);

/// The float tanh GELU uses (for its test).
[[nodiscard]] float tanh_for_gelu(float x);

/// OpenBLAS threads of this process (crown-train: 1 per rank unless told otherwise).
void set_blas_threads(int threads);
/// The BLAS library's own description (OpenBLAS's build configuration).
[[nodiscard]] const char* blas_description();

} // namespace crown::parallel::nn
