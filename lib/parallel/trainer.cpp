// One worker's part of training (include/crown/parallel/trainer.hpp).
#include <algorithm>
#include <cmath>
#include <crown/checkpoint.hpp>
#include <crown/collectives.hpp>
#include <crown/detail/fault.hpp>
#include <crown/error.hpp>
#include <crown/parallel/random.hpp>
#include <crown/parallel/trainer.hpp>
#include <optional>

namespace crown::parallel {

void check_options(const train_options& o, int workers) {
  o.model.check();
  validate(o.plan,
           {workers, o.batch, o.model.blocks, o.model.heads, o.model.channels, o.model.vocabulary});
  if (o.batch < 1)
    throw argument_error("training", "the batch must be positive, not " + std::to_string(o.batch));
  if (o.optimizer != "adam" && o.optimizer != "sgd")
    throw argument_error("training", "unknown optimizer '" + o.optimizer + "' (adam or sgd)");
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    throw argument_error("training", "the learning rate must be positive and finite, not " +
                                         std::to_string(o.lr));
}

namespace {
template <typename T>
std::variant<adam<T>, sgd<T>> make_optimizer(const train_options& o, std::size_t count) {
  if (o.optimizer == "sgd") return sgd<T>(count, {o.lr, 0});
  return adam<T>(count, {.lr = o.lr});
}
} // namespace

template <typename T>
trainer<T>::trainer(const mesh& workers, std::shared_ptr<const corpus> data, train_options o)
    : o_((check_options(o, workers.size()), std::move(o))), data_(std::move(data)),
      mesh_(make_mesh(o_.plan, workers)), dp_mesh_(mesh_.sub({"dp"})),
      model_(o_.model, o_.batch / o_.plan.microbatches),
      ddp_((model_.initialise(o_.seed), dp_mesh_), model_.params(), model_.layout(), o_.ddp),
      optimizer_(make_optimizer<T>(o_, model_.layout().total)) {}

template <typename T>
T trainer<T>::step() {
  detail::fault_point_reached(fault_point::step);
  const int m = o_.plan.microbatches, micro = o_.batch / m;
  const std::uint64_t first = samples_ + std::uint64_t(dp_mesh_.rank()) * o_.batch;
  ddp_.zero_grad();
  double loss = 0;
  for (int k = 0; k < m; ++k) {
    inputs_.clear();
    targets_.clear();
    for (int i = 0; i < micro; ++i)
      data_->training_sample(o_.seed, first + std::uint64_t(k * micro + i), inputs_, targets_);
    std::optional<typename ddp<T>::no_sync_guard> accumulate;
    if (k + 1 < m) accumulate.emplace(ddp_.no_sync()); // reduce once, after the last
    loss += double(model_.forward(inputs_, targets_, micro));
    model_.backward(ddp_.grads(), T(1) / T(m), [&](std::size_t e) { ddp_.mark_ready(e); });
  }
  ddp_.finish();
  std::visit([&](auto& opt) { opt.step(model_.params(), ddp_.grads()); }, optimizer_);
  ++step_;
  samples_ += std::uint64_t(o_.plan.dp) * std::uint64_t(o_.batch);
  return T(loss / m);
}

template <typename T>
T trainer<T>::average(T local) {
  double v = double(local) / dp_mesh_.size();
  co_sum(dp_mesh_, v);
  return T(v);
}

template <typename T>
T trainer<T>::evaluate(int batches) {
  const int micro = o_.batch / o_.plan.microbatches;
  double sum = 0;
  int count = 0;
  for (int b = 0; b < batches; ++b)
    for (int k = 0; k < o_.plan.microbatches; ++k) {
      inputs_.clear();
      targets_.clear();
      const std::uint64_t first =
          (std::uint64_t(b) * std::uint64_t(dp_mesh_.size()) + std::uint64_t(dp_mesh_.rank())) *
              std::uint64_t(o_.batch) +
          std::uint64_t(k * micro);
      for (int i = 0; i < micro; ++i) data_->validation_sample(first + i, inputs_, targets_);
      sum += double(model_.forward(inputs_, targets_, micro));
      ++count;
    }
  return average(T(sum / std::max(count, 1)));
}

template <typename T>
std::string trainer<T>::sample(const std::string& prompt, int length, double temperature,
                               std::uint64_t seed) {
  const int ctx = o_.model.context, V = o_.model.vocabulary;
  std::vector<int> tokens(std::size_t(ctx), '\n'); // the left pads a short prompt
  for (unsigned char ch : prompt) tokens.push_back(ch);
  std::string out;
  std::vector<double> p(static_cast<std::size_t>(V));
  for (int n = 0; n < length; ++n) {
    const std::span<const int> window(tokens.data() + tokens.size() - std::size_t(ctx),
                                      std::size_t(ctx));
    model_.forward(window, {}, 1);
    const auto probs = model_.probabilities().subspan(std::size_t(ctx - 1) * V, std::size_t(V));
    double total = 0;
    for (int v = 0; v < V; ++v)
      total += p[std::size_t(v)] = std::pow(double(probs[std::size_t(v)]), 1.0 / temperature);
    double u = unit_interval(mix64(seed) ^ std::uint64_t(n)) * total;
    int next = V - 1;
    for (int v = 0; v < V; ++v)
      if ((u -= p[std::size_t(v)]) < 0) {
        next = v;
        break;
      }
    tokens.push_back(next);
    out.push_back(char(next));
  }
  return out;
}

namespace {
/// The optimizer's state arrays, named as they are stored (spans of T, or of const T for a
/// const optimizer).
template <typename Optimizer>
auto optimizer_state(Optimizer& o) {
  using state = decltype(std::get<0>(o).first_moment());
  std::vector<std::pair<const char*, state>> out;
  if (auto* a = std::get_if<0>(&o))
    out = {{"adam.m", a->first_moment()}, {"adam.v", a->second_moment()}};
  else if (!std::get<1>(o).momentum_buffer().empty())
    out = {{"sgd.momentum", std::get<1>(o).momentum_buffer()}};
  return out;
}
const char* type_name(float) { return "float"; }
const char* type_name(double) { return "double"; }
} // namespace

template <typename T>
void trainer<T>::save(checkpoint_writer& w) const {
  const std::vector<std::size_t> shape{model_.layout().total};
  w.write_replicated("params", model_.params(), shape);
  for (auto [name, state] : optimizer_state(optimizer_)) w.write_replicated(name, state, shape);
  w.put("step", std::int64_t{step_});
  w.put("samples", std::int64_t(samples_));
  w.put("seed", std::int64_t(o_.seed));
  w.put("plan", o_.plan.to_string());
  w.put("model", o_.model.to_string());
  w.put("optimizer", o_.optimizer);
  w.put("dtype", type_name(T{}));
}

template <typename T>
void trainer<T>::load(checkpoint_reader& r) {
  auto must_match = [&](const char* what, const std::string& saved, const std::string& here) {
    if (saved != here)
      throw argument_error("trainer::load", std::string("the checkpoint's ") + what + " is " +
                                                saved + ", this run's " + here);
  };
  must_match("model", r.get_string("model"), o_.model.to_string());
  must_match("optimizer", r.get_string("optimizer"), o_.optimizer);
  must_match("element type", r.get_string("dtype"), type_name(T{}));
  must_match("seed", std::to_string(r.get_int("seed")), std::to_string(std::int64_t(o_.seed)));
  const std::vector<std::size_t> shape{model_.layout().total};
  r.read_replicated("params", model_.params(), shape);
  for (auto [name, state] : optimizer_state(optimizer_)) r.read_replicated(name, state, shape);
  step_ = long(r.get_int("step"));
  samples_ = std::uint64_t(r.get_int("samples"));
  std::visit([&](auto& opt) { opt.set_steps(step_); }, optimizer_);
}

template <typename T>
memory_use trainer<T>::memory() const noexcept {
  const std::size_t p = model_.layout().total * sizeof(T);
  const std::size_t opt = std::visit([](const auto& o) { return o.state_bytes(); }, optimizer_);
  return {p, p, opt, model_.activation_bytes()};
}

template class trainer<float>;
template class trainer<double>;

} // namespace crown::parallel
