// The character-level GPT (include/crown/parallel/gpt.hpp): layout, initialisation, forward
// and backward, wired from the layers of nn.hpp.
#include <cmath>
#include <crown/error.hpp>
#include <crown/parallel/gpt.hpp>
#include <crown/parallel/nn.hpp>
#include <crown/parallel/random.hpp>
#include <cstring>
#include <utility>

namespace crown::parallel {

void gpt_config::check() const {
  for (auto [name, v] :
       {std::pair{"vocabulary", vocabulary}, std::pair{"context", context},
        std::pair{"channels", channels}, std::pair{"heads", heads}, std::pair{"blocks", blocks}})
    if (v < 1)
      throw argument_error("gpt_config",
                           std::string(name) + " must be positive, not " + std::to_string(v));
  if (channels % heads != 0)
    throw argument_error("gpt_config", std::to_string(heads) + " heads do not divide " +
                                           std::to_string(channels) + " channels");
}

std::string gpt_config::to_string() const {
  return "L=" + std::to_string(blocks) + ",C=" + std::to_string(channels) +
         ",NH=" + std::to_string(heads) + ",T=" + std::to_string(context) +
         ",V=" + std::to_string(vocabulary);
}

namespace {
// Entries per block, in registration order (gpt::backward names them by these indices).
enum block_entry : std::size_t {
  ln1_w,
  ln1_b,
  qkv_w,
  qkv_b,
  attn_proj_w,
  attn_proj_b,
  ln2_w,
  ln2_b,
  fc_w,
  fc_b,
  mlp_proj_w,
  mlp_proj_b,
  per_block
};
constexpr std::size_t first_block = 2; // after wte, wpe
std::size_t block_base(int l) { return first_block + per_block * std::size_t(l); }
// Units in the flat array's order: the head, the blocks from the last, the embeddings.
constexpr std::size_t head_unit = 0;
std::size_t block_unit(int blocks, int l) { return std::size_t(blocks - l); }
std::size_t embeddings_unit(int blocks) { return std::size_t(blocks) + 1; }
} // namespace

param_layout param_layout::of(const gpt_config& c) {
  c.check();
  const int V = c.vocabulary, C = c.channels;
  param_layout p;
  auto add = [&](std::string name, std::vector<int> shape, bool projection = false) {
    std::size_t n = 1;
    for (int s : shape) n *= std::size_t(s);
    p.entries.push_back({std::move(name), 0, n, std::move(shape), projection});
  };
  add("wte", {V, C});
  add("wpe", {c.context, C});
  for (int l = 0; l < c.blocks; ++l) {
    const std::string h = std::string("h").append(std::to_string(l)).append(".");
    add(h + "ln1.w", {C});
    add(h + "ln1.b", {C});
    add(h + "attn.qkv.w", {3 * C, C});
    add(h + "attn.qkv.b", {3 * C});
    add(h + "attn.proj.w", {C, C}, true);
    add(h + "attn.proj.b", {C});
    add(h + "ln2.w", {C});
    add(h + "ln2.b", {C});
    add(h + "mlp.fc.w", {4 * C, C});
    add(h + "mlp.fc.b", {4 * C});
    add(h + "mlp.proj.w", {C, 4 * C}, true);
    add(h + "mlp.proj.b", {C});
  }
  add("lnf.w", {C});
  add("lnf.b", {C});
  add("lm_head.w", {V, C});
  for (auto e = p.entries.rbegin(); e != p.entries.rend(); ++e) { // reverse order in memory
    e->offset = p.total;
    p.total += e->count;
  }
  auto unit = [&](std::string name, std::size_t first, std::size_t end) {
    std::size_t count = 0;
    for (std::size_t i = first; i < end; ++i) count += p.entries[i].count;
    p.units.push_back({std::move(name), p.entries[end - 1].offset, count, first, end});
  };
  unit("head", block_base(c.blocks), p.entries.size());
  for (int l = c.blocks - 1; l >= 0; --l)
    unit(std::string("h").append(std::to_string(l)), block_base(l), block_base(l + 1));
  unit("embeddings", 0, first_block);
  p.unit_of.resize(p.entries.size());
  for (std::size_t u = 0; u < p.units.size(); ++u)
    for (std::size_t i = p.units[u].first_entry; i < p.units[u].end_entry; ++i) p.unit_of[i] = u;
  return p;
}

const param_entry& param_layout::at(std::string_view name) const {
  for (const auto& e : entries)
    if (e.name == name) return e;
  throw argument_error("param_layout", "no parameter named '" + std::string(name) + "'");
}

template <typename T>
gpt<T>::block_acts::block_acts(std::size_t N, std::size_t C, std::size_t att_size) {
  std::size_t at = 0;
  auto take = [&](std::size_t n) { return std::exchange(at, at + n); };
  ln1 = take(N * C), ln1_mean = take(N), ln1_rstd = take(N), qkv = take(3 * N * C);
  att = take(att_size), atty = take(N * C), res2 = take(N * C), ln2 = take(N * C);
  ln2_mean = take(N), ln2_rstd = take(N), fch = take(4 * N * C), fch_gelu = take(4 * N * C);
  res3 = take(N * C), size = at;
}

/// Points every unit into flat parameter and gradient arrays; a unit released after its
/// backward makes its entries ready, in reverse entry order (the flat array's).
template <typename T>
class gpt<T>::flat_source final : public unit_source<T> {
public:
  flat_source(const param_layout& l, std::span<const T> params, std::span<T> grads,
              const std::function<void(std::size_t)>* ready)
      : layout_(l), params_(params), grads_(grads), ready_(ready) {}
  std::span<const T> acquire(std::size_t u, pass) override {
    return params_.subspan(layout_.units[u].offset, layout_.units[u].count);
  }
  std::span<T> gradient(std::size_t u) override {
    return grads_.subspan(layout_.units[u].offset, layout_.units[u].count);
  }
  void release(std::size_t u, pass p) override {
    if (p == pass::backward && ready_)
      for (std::size_t e = layout_.units[u].end_entry; e-- > layout_.units[u].first_entry;)
        (*ready_)(e);
  }

private:
  const param_layout& layout_;
  std::span<const T> params_;
  std::span<T> grads_;
  const std::function<void(std::size_t)>* ready_;
};

template <typename T>
void initialise_unit(const param_layout& layout, int blocks, std::uint64_t seed, std::size_t unit,
                     std::span<T> out) {
  const param_unit& u = layout.units.at(unit);
  if (out.size() != u.count)
    throw argument_error("initialise_unit", "unit " + u.name + " holds " + std::to_string(u.count) +
                                                " elements, given " + std::to_string(out.size()));
  // Entries in registration order, each from one stream (matrices draw, vectors do not):
  // the values depend on the seed and the model's shape only.
  std::uint64_t drawn = 0;
  for (std::size_t i = 0; i < u.first_entry; ++i)
    if (layout.entries[i].shape.size() != 1) drawn += layout.entries[i].count;
  normal_source rng(seed, drawn);
  const double proj_std = 0.02 / std::sqrt(2.0 * blocks);
  for (std::size_t i = u.first_entry; i < u.end_entry; ++i) {
    const auto& e = layout.entries[i];
    const bool is_bias = e.shape.size() == 1;
    const bool is_gain = is_bias && e.name.size() > 2 && e.name.ends_with(".w");
    for (auto& x : out.subspan(e.offset - u.offset, e.count))
      x = is_gain ? T(1) : is_bias ? T(0) : T(rng.next() * (e.is_projection ? proj_std : 0.02));
  }
}

template <typename T>
gpt<T>::gpt(const gpt_config& c, int max_batch, bool hold_params)
    : config_(c), layout_(param_layout::of(c)), max_batch_(max_batch),
      rows_(std::size_t(max_batch) * std::size_t(c.context)),
      block_(rows_, std::size_t(c.channels),
             std::size_t(max_batch) * std::size_t(c.heads) * c.context * c.context),
      lnf_at_(rows_ * std::size_t(c.channels) + block_.size * std::size_t(c.blocks)) {
  if (max_batch < 1)
    throw argument_error("gpt", "the batch must be positive, not " + std::to_string(max_batch));
  const std::size_t N = rows_, C = std::size_t(c.channels);
  params_.resize(hold_params ? layout_.total : 0);
  unit_params_.resize(layout_.units.size());
  unit_grads_.resize(layout_.units.size());
  // encoded, the blocks, then lnf, lnf_mean, lnf_rstd
  acts_.resize(lnf_at_ + N * C + 2 * N);
  probs_.resize(N * std::size_t(c.vocabulary));
  // dres, dln, datty, dqkv, dfch, dfch_gelu, attention's 2·T·T
  scratch_.resize(N * C * 14 + 2 * std::size_t(c.context) * c.context);
}

template <typename T>
std::size_t gpt<T>::activation_bytes() const noexcept {
  return (acts_.size() + probs_.size() + scratch_.size()) * sizeof(T) +
         (inputs_.capacity() + targets_.capacity()) * sizeof(int);
}

template <typename T>
std::span<const T> gpt<T>::param(std::size_t entry) const noexcept {
  const auto& e = layout_.entries[entry];
  const std::size_t u = layout_.unit_of[entry];
  return unit_params_[u].subspan(e.offset - layout_.units[u].offset, e.count);
}

template <typename T>
std::span<T> gpt<T>::grad(std::size_t entry) const noexcept {
  const auto& e = layout_.entries[entry];
  const std::size_t u = layout_.unit_of[entry];
  return unit_grads_[u].subspan(e.offset - layout_.units[u].offset, e.count);
}

template <typename T>
void gpt<T>::enter(unit_source<T>& source, std::size_t unit, pass p) {
  const std::size_t count = layout_.units[unit].count;
  unit_params_[unit] = source.acquire(unit, p);
  if (p == pass::backward) unit_grads_[unit] = source.gradient(unit);
  if (unit_params_[unit].size() != count ||
      (p == pass::backward && unit_grads_[unit].size() != count))
    throw argument_error("gpt", "unit " + layout_.units[unit].name + " holds " +
                                    std::to_string(count) + " elements, its source gave " +
                                    std::to_string(unit_params_[unit].size()));
}

template <typename T>
void gpt<T>::initialise(std::uint64_t seed) {
  if (params_.size() != layout_.total)
    throw state_error("gpt::initialise", "this model holds no parameters (a sharded one)");
  for (std::size_t u = 0; u < layout_.units.size(); ++u)
    initialise_unit<T>(
        layout_, config_.blocks, seed, u,
        std::span<T>(params_).subspan(layout_.units[u].offset, layout_.units[u].count));
}

template <typename T>
T gpt<T>::forward(std::span<const int> inputs, std::span<const int> targets, int batch) {
  if (params_.size() != layout_.total)
    throw state_error("gpt::forward", "this model holds no parameters: pass their source");
  flat_source all(layout_, params_, {}, nullptr);
  return forward(inputs, targets, batch, all);
}

template <typename T>
T gpt<T>::forward(std::span<const int> inputs, std::span<const int> targets, int batch,
                  unit_source<T>& source) {
  const gpt_config& c = config_;
  if (batch < 1 || batch > max_batch_ || inputs.size() != std::size_t(batch) * c.context ||
      (!targets.empty() && targets.size() != inputs.size()))
    throw argument_error("gpt::forward",
                         "a batch of " + std::to_string(batch) + " samples (at most " +
                             std::to_string(max_batch_) + ") needs " +
                             std::to_string(std::size_t(batch) * c.context) + " tokens, given " +
                             std::to_string(inputs.size()) + " inputs and " +
                             std::to_string(targets.size()) + " targets");
  batch_ = batch;
  inputs_.assign(inputs.begin(), inputs.end());
  targets_.assign(targets.begin(), targets.end());
  const int B = batch, T_ = c.context, C = c.channels, NH = c.heads, V = c.vocabulary;
  const int N = B * T_;
  const std::size_t NC = std::size_t(N) * C, Nmax = rows_;
  const block_acts& ba = block_;
  std::span<T> acts(acts_);
  auto at = [&](std::size_t offset, std::size_t n) { return acts.subspan(offset, n); };
  auto block = [&](int l, std::size_t field, std::size_t n) {
    return block_field(acts, l, field, n);
  };
  auto cp = [](std::span<T> s) { return std::span<const T>(s); };
  const std::size_t lnf_at = lnf_at_;

  enter(source, embeddings_unit(c.blocks), pass::forward);
  nn::embedding_forward<T>(at(0, NC), inputs, param(0), param(1), B, T_, C);
  source.release(embeddings_unit(c.blocks), pass::forward);
  std::span<const T> x = cp(at(0, NC));
  for (int l = 0; l < c.blocks; ++l) {
    const std::size_t p = block_base(l);
    enter(source, block_unit(c.blocks, l), pass::forward);
    auto ln1 = block(l, ba.ln1, NC), qkv = block(l, ba.qkv, 3 * NC);
    auto att = block(l, ba.att, std::size_t(B) * NH * T_ * T_), atty = block(l, ba.atty, NC);
    auto res2 = block(l, ba.res2, NC), ln2 = block(l, ba.ln2, NC);
    auto fch = block(l, ba.fch, 4 * NC), fch_gelu = block(l, ba.fch_gelu, 4 * NC);
    auto res3 = block(l, ba.res3, NC);
    nn::layer_norm_forward<T>(ln1, block(l, ba.ln1_mean, N), block(l, ba.ln1_rstd, N), x,
                              param(p + ln1_w), param(p + ln1_b), N, C);
    nn::linear_forward<T>(qkv, cp(ln1), param(p + qkv_w), param(p + qkv_b), N, C, 3 * C);
    nn::attention_forward<T>(atty, att, cp(qkv), B, T_, C, NH);
    nn::linear_forward<T>(res2, cp(atty), param(p + attn_proj_w), param(p + attn_proj_b), N, C, C);
    nn::residual_forward<T>(res2, cp(res2), x);
    nn::layer_norm_forward<T>(ln2, block(l, ba.ln2_mean, N), block(l, ba.ln2_rstd, N), cp(res2),
                              param(p + ln2_w), param(p + ln2_b), N, C);
    nn::linear_forward<T>(fch, cp(ln2), param(p + fc_w), param(p + fc_b), N, C, 4 * C);
    nn::gelu_forward<T>(fch_gelu, cp(fch));
    nn::linear_forward<T>(res3, cp(fch_gelu), param(p + mlp_proj_w), param(p + mlp_proj_b), N,
                          4 * C, C);
    nn::residual_forward<T>(res3, cp(res3), cp(res2));
    source.release(block_unit(c.blocks, l), pass::forward);
    x = cp(res3);
  }
  const std::size_t head = block_base(c.blocks);
  enter(source, head_unit, pass::forward);
  auto lnf = at(lnf_at, NC);
  nn::layer_norm_forward<T>(lnf, at(lnf_at + Nmax * C, N), at(lnf_at + Nmax * C + Nmax, N), x,
                            param(head), param(head + 1), N, C);
  std::span<T> probs = std::span<T>(probs_).first(std::size_t(N) * V);
  nn::linear_forward<T>(probs, cp(lnf), param(head + 2), {}, N, C, V);
  source.release(head_unit, pass::forward);
  if (targets.empty()) { // probabilities only (sampling)
    const std::vector<int> none(std::size_t(N), 0);
    (void)nn::cross_entropy_forward<T>(probs, none, N, V);
    return T(0);
  }
  return nn::cross_entropy_forward<T>(probs, targets, N, V);
}

template <typename T>
void gpt<T>::backward(std::span<T> grads, T loss_scale,
                      const std::function<void(std::size_t)>& ready) {
  if (grads.size() != layout_.total)
    throw argument_error("gpt::backward", "the gradient holds " + std::to_string(grads.size()) +
                                              " elements, the parameters " +
                                              std::to_string(layout_.total));
  if (params_.size() != layout_.total)
    throw state_error("gpt::backward", "this model holds no parameters: pass their source");
  flat_source all(layout_, params_, grads, &ready);
  backward(loss_scale, all);
}

template <typename T>
void gpt<T>::backward(T loss_scale, unit_source<T>& source) {
  const gpt_config& c = config_;
  if (batch_ == 0 || targets_.empty())
    throw state_error("gpt::backward", "no forward with targets to go back through");
  const int B = batch_, T_ = c.context, C = c.channels, NH = c.heads, V = c.vocabulary;
  const int N = B * T_;
  const std::size_t NC = std::size_t(N) * C, Nmax = rows_;
  const block_acts& ba = block_;
  std::span<const T> acts(acts_);
  auto block = [&](int l, std::size_t field, std::size_t n) {
    return block_field(acts, l, field, n);
  };
  auto cp = [](std::span<T> s) { return std::span<const T>(s); };
  auto zero = [](std::span<T> s) { std::memset(s.data(), 0, s.size_bytes()); };
  std::span<T> sc(scratch_);
  std::span<T> dres = sc.subspan(0, NC), dln = sc.subspan(Nmax * C, NC);
  std::span<T> datty = sc.subspan(2 * Nmax * C, NC), dqkv = sc.subspan(3 * Nmax * C, 3 * NC);
  std::span<T> dfch = sc.subspan(6 * Nmax * C, 4 * NC);
  std::span<T> dfch_gelu = sc.subspan(10 * Nmax * C, 4 * NC);
  std::span<T> att_scratch = sc.subspan(14 * Nmax * C, 2 * std::size_t(T_) * T_);
  const std::size_t lnf_at = lnf_at_;
  const std::size_t head = block_base(c.blocks);
  const std::span<const T> last =
      c.blocks > 0 ? block(c.blocks - 1, ba.res3, NC) : acts.subspan(0, NC);

  std::span<T> dlogits = std::span<T>(probs_).first(std::size_t(N) * V);
  nn::cross_entropy_backward<T>(dlogits, targets_, N, V, loss_scale / T(N));
  enter(source, head_unit, pass::backward);
  zero(dln);
  nn::linear_backward<T>(dln, grad(head + 2), {}, cp(dlogits), acts.subspan(lnf_at, NC),
                         param(head + 2), N, C, V);
  zero(dres);
  nn::layer_norm_backward<T>(dres, grad(head), grad(head + 1), cp(dln), last, param(head),
                             acts.subspan(lnf_at + Nmax * C, N),
                             acts.subspan(lnf_at + Nmax * C + Nmax, N), N, C);
  source.release(head_unit, pass::backward);
  for (int l = c.blocks - 1; l >= 0; --l) {
    const std::size_t p = block_base(l);
    const std::span<const T> x = l > 0 ? block(l - 1, ba.res3, NC) : acts.subspan(0, NC);
    enter(source, block_unit(c.blocks, l), pass::backward);
    zero(dfch_gelu);
    nn::linear_backward<T>(dfch_gelu, grad(p + mlp_proj_w), grad(p + mlp_proj_b), cp(dres),
                           block(l, ba.fch_gelu, 4 * NC), param(p + mlp_proj_w), N, 4 * C, C);
    zero(dfch);
    nn::gelu_backward<T>(dfch, block(l, ba.fch, 4 * NC), cp(dfch_gelu));
    zero(dln);
    nn::linear_backward<T>(dln, grad(p + fc_w), grad(p + fc_b), cp(dfch), block(l, ba.ln2, NC),
                           param(p + fc_w), N, C, 4 * C);
    nn::layer_norm_backward<T>(dres, grad(p + ln2_w), grad(p + ln2_b), cp(dln),
                               block(l, ba.res2, NC), param(p + ln2_w), block(l, ba.ln2_mean, N),
                               block(l, ba.ln2_rstd, N), N, C);
    zero(datty);
    nn::linear_backward<T>(datty, grad(p + attn_proj_w), grad(p + attn_proj_b), cp(dres),
                           block(l, ba.atty, NC), param(p + attn_proj_w), N, C, C);
    zero(dqkv);
    nn::attention_backward<T>(dqkv, att_scratch, cp(datty), block(l, ba.qkv, 3 * NC),
                              block(l, ba.att, std::size_t(B) * NH * T_ * T_), B, T_, C, NH);
    zero(dln);
    nn::linear_backward<T>(dln, grad(p + qkv_w), grad(p + qkv_b), cp(dqkv), block(l, ba.ln1, NC),
                           param(p + qkv_w), N, C, 3 * C);
    nn::layer_norm_backward<T>(dres, grad(p + ln1_w), grad(p + ln1_b), cp(dln), x, param(p + ln1_w),
                               block(l, ba.ln1_mean, N), block(l, ba.ln1_rstd, N), N, C);
    source.release(block_unit(c.blocks, l), pass::backward);
  }
  enter(source, embeddings_unit(c.blocks), pass::backward);
  nn::embedding_backward<T>(grad(0), grad(1), cp(dres), inputs_, B, T_, C);
  source.release(embeddings_unit(c.blocks), pass::backward);
}

template class gpt<float>;
template class gpt<double>;
template void initialise_unit<float>(const param_layout&, int, std::uint64_t, std::size_t,
                                     std::span<float>);
template void initialise_unit<double>(const param_layout&, int, std::uint64_t, std::size_t,
                                      std::span<double>);

} // namespace crown::parallel
