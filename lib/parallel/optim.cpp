// Adam and SGD (include/crown/parallel/optim.hpp).
#include <cmath>
#include <crown/error.hpp>
#include <crown/parallel/optim.hpp>

namespace crown::parallel {

namespace {
void check_sizes(const char* who, std::size_t params, std::size_t grads, std::size_t state) {
  if (params != grads || (state != 0 && params != state))
    throw argument_error(who, std::to_string(params) + " parameters but " + std::to_string(grads) +
                                  " gradients and a state of " + std::to_string(state));
}
} // namespace

template <typename T>
void adam<T>::step(std::span<T> params, std::span<const T> grads) {
  check_sizes("adam::step", params.size(), grads.size(), m_.size());
  ++t_;
  const double bc1 = 1 - std::pow(o_.beta1, double(t_)), bc2 = 1 - std::pow(o_.beta2, double(t_));
  const T step_size = T(o_.lr / bc1), sqrt_bc2 = T(std::sqrt(bc2));
  const T b1 = T(o_.beta1), b2 = T(o_.beta2), eps = T(o_.eps), wd = T(o_.weight_decay);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const T g = wd != T(0) ? grads[i] + wd * params[i] : grads[i];
    m_[i] = b1 * m_[i] + (T(1) - b1) * g;
    v_[i] = b2 * v_[i] + (T(1) - b2) * g * g;
    params[i] -= step_size * m_[i] / (std::sqrt(v_[i]) / sqrt_bc2 + eps);
  }
}

template <typename T>
void sgd<T>::step(std::span<T> params, std::span<const T> grads) {
  check_sizes("sgd::step", params.size(), grads.size(), b_.size());
  const T lr = T(o_.lr), mu = T(o_.momentum);
  for (std::size_t i = 0; i < params.size(); ++i) {
    T d = grads[i];
    if (!b_.empty()) {
      b_[i] = first_ ? d : mu * b_[i] + d;
      d = b_[i];
    }
    params[i] -= lr * d;
  }
  first_ = false;
}

template class adam<float>;
template class adam<double>;
template class sgd<float>;
template class sgd<double>;

} // namespace crown::parallel
