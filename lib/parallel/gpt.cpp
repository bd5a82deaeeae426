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

template <typename T>
gpt<T>::gpt(const gpt_config& c, int max_batch)
    : config_(c), layout_(param_layout::of(c)), max_batch_(max_batch),
      rows_(std::size_t(max_batch) * std::size_t(c.context)),
      block_(rows_, std::size_t(c.channels),
             std::size_t(max_batch) * std::size_t(c.heads) * c.context * c.context),
      lnf_at_(rows_ * std::size_t(c.channels) + block_.size * std::size_t(c.blocks)) {
  if (max_batch < 1)
    throw argument_error("gpt", "the batch must be positive, not " + std::to_string(max_batch));
  const std::size_t N = rows_, C = std::size_t(c.channels);
  params_.resize(layout_.total);
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
std::span<T> gpt<T>::param(std::size_t entry) noexcept {
  const auto& e = layout_.entries[entry];
  return std::span<T>(params_).subspan(e.offset, e.count);
}

template <typename T>
void gpt<T>::initialise(std::uint64_t seed) {
  normal_source rng(seed);
  const double proj_std = 0.02 / std::sqrt(2.0 * config_.blocks);
  // Entries in registration order, each from the same stream: the values depend on the
  // seed and the model's shape only.
  for (std::size_t i = 0; i < layout_.entries.size(); ++i) {
    const auto& e = layout_.entries[i];
    auto p = param(i);
    const bool is_bias = e.shape.size() == 1;
    const bool is_gain = is_bias && e.name.size() > 2 && e.name.ends_with(".w");
    for (auto& x : p)
      x = is_gain ? T(1) : is_bias ? T(0) : T(rng.next() * (e.is_projection ? proj_std : 0.02));
  }
}

template <typename T>
T gpt<T>::forward(std::span<const int> inputs, std::span<const int> targets, int batch) {
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

  nn::embedding_forward<T>(at(0, NC), inputs, cp(param(0)), cp(param(1)), B, T_, C);
  std::span<const T> x = cp(at(0, NC));
  for (int l = 0; l < c.blocks; ++l) {
    const std::size_t p = block_base(l);
    auto ln1 = block(l, ba.ln1, NC), qkv = block(l, ba.qkv, 3 * NC);
    auto att = block(l, ba.att, std::size_t(B) * NH * T_ * T_), atty = block(l, ba.atty, NC);
    auto res2 = block(l, ba.res2, NC), ln2 = block(l, ba.ln2, NC);
    auto fch = block(l, ba.fch, 4 * NC), fch_gelu = block(l, ba.fch_gelu, 4 * NC);
    auto res3 = block(l, ba.res3, NC);
    nn::layer_norm_forward<T>(ln1, block(l, ba.ln1_mean, N), block(l, ba.ln1_rstd, N), x,
                              cp(param(p + ln1_w)), cp(param(p + ln1_b)), N, C);
    nn::linear_forward<T>(qkv, cp(ln1), cp(param(p + qkv_w)), cp(param(p + qkv_b)), N, C, 3 * C);
    nn::attention_forward<T>(atty, att, cp(qkv), B, T_, C, NH);
    nn::linear_forward<T>(res2, cp(atty), cp(param(p + attn_proj_w)), cp(param(p + attn_proj_b)), N,
                          C, C);
    nn::residual_forward<T>(res2, cp(res2), x);
    nn::layer_norm_forward<T>(ln2, block(l, ba.ln2_mean, N), block(l, ba.ln2_rstd, N), cp(res2),
                              cp(param(p + ln2_w)), cp(param(p + ln2_b)), N, C);
    nn::linear_forward<T>(fch, cp(ln2), cp(param(p + fc_w)), cp(param(p + fc_b)), N, C, 4 * C);
    nn::gelu_forward<T>(fch_gelu, cp(fch));
    nn::linear_forward<T>(res3, cp(fch_gelu), cp(param(p + mlp_proj_w)), cp(param(p + mlp_proj_b)),
                          N, 4 * C, C);
    nn::residual_forward<T>(res3, cp(res3), cp(res2));
    x = cp(res3);
  }
  const std::size_t head = block_base(c.blocks);
  auto lnf = at(lnf_at, NC);
  nn::layer_norm_forward<T>(lnf, at(lnf_at + Nmax * C, N), at(lnf_at + Nmax * C + Nmax, N), x,
                            cp(param(head)), cp(param(head + 1)), N, C);
  std::span<T> probs = std::span<T>(probs_).first(std::size_t(N) * V);
  nn::linear_forward<T>(probs, cp(lnf), cp(param(head + 2)), {}, N, C, V);
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
  const gpt_config& c = config_;
  if (batch_ == 0 || targets_.empty())
    throw state_error("gpt::backward", "no forward with targets to go back through");
  if (grads.size() != layout_.total)
    throw argument_error("gpt::backward", "the gradient holds " + std::to_string(grads.size()) +
                                              " elements, the parameters " +
                                              std::to_string(layout_.total));
  const int B = batch_, T_ = c.context, C = c.channels, NH = c.heads, V = c.vocabulary;
  const int N = B * T_;
  const std::size_t NC = std::size_t(N) * C, Nmax = rows_;
  const block_acts& ba = block_;
  std::span<const T> acts(acts_);
  auto block = [&](int l, std::size_t field, std::size_t n) {
    return block_field(acts, l, field, n);
  };
  auto grad = [&](std::size_t entry) {
    const auto& e = layout_.entries[entry];
    return grads.subspan(e.offset, e.count);
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
  zero(dln);
  nn::linear_backward<T>(dln, grad(head + 2), {}, cp(dlogits), acts.subspan(lnf_at, NC),
                         cp(param(head + 2)), N, C, V);
  ready(head + 2);
  zero(dres);
  nn::layer_norm_backward<T>(dres, grad(head), grad(head + 1), cp(dln), last, cp(param(head)),
                             acts.subspan(lnf_at + Nmax * C, N),
                             acts.subspan(lnf_at + Nmax * C + Nmax, N), N, C);
  ready(head + 1);
  ready(head);
  for (int l = c.blocks - 1; l >= 0; --l) {
    const std::size_t p = block_base(l);
    const std::span<const T> x = l > 0 ? block(l - 1, ba.res3, NC) : acts.subspan(0, NC);
    auto done = [&](std::size_t w) { // a weight and its bias (or gain) are final
      ready(p + w + 1);
      ready(p + w);
    };
    zero(dfch_gelu);
    nn::linear_backward<T>(dfch_gelu, grad(p + mlp_proj_w), grad(p + mlp_proj_b), cp(dres),
                           block(l, ba.fch_gelu, 4 * NC), cp(param(p + mlp_proj_w)), N, 4 * C, C);
    done(mlp_proj_w);
    zero(dfch);
    nn::gelu_backward<T>(dfch, block(l, ba.fch, 4 * NC), cp(dfch_gelu));
    zero(dln);
    nn::linear_backward<T>(dln, grad(p + fc_w), grad(p + fc_b), cp(dfch), block(l, ba.ln2, NC),
                           cp(param(p + fc_w)), N, C, 4 * C);
    done(fc_w);
    nn::layer_norm_backward<T>(dres, grad(p + ln2_w), grad(p + ln2_b), cp(dln),
                               block(l, ba.res2, NC), cp(param(p + ln2_w)),
                               block(l, ba.ln2_mean, N), block(l, ba.ln2_rstd, N), N, C);
    done(ln2_w);
    zero(datty);
    nn::linear_backward<T>(datty, grad(p + attn_proj_w), grad(p + attn_proj_b), cp(dres),
                           block(l, ba.atty, NC), cp(param(p + attn_proj_w)), N, C, C);
    done(attn_proj_w);
    zero(dqkv);
    nn::attention_backward<T>(dqkv, att_scratch, cp(datty), block(l, ba.qkv, 3 * NC),
                              block(l, ba.att, std::size_t(B) * NH * T_ * T_), B, T_, C, NH);
    zero(dln);
    nn::linear_backward<T>(dln, grad(p + qkv_w), grad(p + qkv_b), cp(dqkv), block(l, ba.ln1, NC),
                           cp(param(p + qkv_w)), N, C, 3 * C);
    done(qkv_w);
    nn::layer_norm_backward<T>(dres, grad(p + ln1_w), grad(p + ln1_b), cp(dln), x,
                               cp(param(p + ln1_w)), block(l, ba.ln1_mean, N),
                               block(l, ba.ln1_rstd, N), N, C);
    done(ln1_w);
  }
  nn::embedding_backward<T>(grad(0), grad(1), cp(dres), inputs_, B, T_, C);
  ready(1);
  ready(0);
}

template class gpt<float>;
template class gpt<double>;

} // namespace crown::parallel
