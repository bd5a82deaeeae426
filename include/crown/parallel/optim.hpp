// include/crown/parallel/optim.hpp — Adam and SGD over flat parameter and gradient arrays,
// with PyTorch's update formulas (torch.optim.Adam and SGD, no weight decay unless asked).
#pragma once
#include <crown/parallel/memory.hpp>
#include <cstddef>
#include <span>

namespace crown::parallel {

struct adam_options {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
};

/// torch.optim.Adam: m = b1·m + (1-b1)·g, v = b2·v + (1-b2)·g², then
/// p -= lr/(1-b1^t) · m / (sqrt(v)/sqrt(1-b2^t) + eps). Holds m and v (2 x the parameters).
template <typename T>
class adam {
public:
  adam(std::size_t count, adam_options o = {})
      : o_(o), m_(tracked<T>(buffer_kind::optimizer, count)),
        v_(tracked<T>(buffer_kind::optimizer, count)) {}
  void step(std::span<T> params, std::span<const T> grads);
  [[nodiscard]] long steps() const noexcept { return t_; }
  [[nodiscard]] std::span<T> first_moment() noexcept { return m_; }
  [[nodiscard]] std::span<T> second_moment() noexcept { return v_; }
  [[nodiscard]] std::span<const T> first_moment() const noexcept { return m_; }
  [[nodiscard]] std::span<const T> second_moment() const noexcept { return v_; }
  [[nodiscard]] std::size_t state_bytes() const noexcept { return 2 * m_.size() * sizeof(T); }
  void set_steps(long t) noexcept { t_ = t; } ///< after loading its state from a checkpoint

private:
  adam_options o_;
  tracked_vector<T> m_, v_;
  long t_ = 0;
};

struct sgd_options {
  double lr = 1e-2, momentum = 0;
};

/// torch.optim.SGD: with momentum, b = momentum·b + g (b = g the first time), p -= lr·b.
template <typename T>
class sgd {
public:
  sgd(std::size_t count, sgd_options o = {})
      : o_(o), b_(tracked<T>(buffer_kind::optimizer, o.momentum != 0 ? count : 0)) {}
  void step(std::span<T> params, std::span<const T> grads);
  [[nodiscard]] std::span<T> momentum_buffer() noexcept { return b_; }
  [[nodiscard]] std::span<const T> momentum_buffer() const noexcept { return b_; }
  [[nodiscard]] std::size_t state_bytes() const noexcept { return b_.size() * sizeof(T); }
  void set_steps(long t) noexcept { first_ = t == 0; } ///< after loading its state

private:
  sgd_options o_;
  tracked_vector<T> b_;
  bool first_ = true;
};

} // namespace crown::parallel
