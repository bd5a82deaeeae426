// The character-level GPT (include/crown/parallel/gpt.hpp): layout, initialisation, forward
// and backward, wired from the layers of nn.hpp.
#include <algorithm>
#include <cmath>
#include <crown/collectives.hpp>
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
// Entry indices of a part's layout: wte, wpe (the first stage), its blocks, lnf.w, lnf.b,
// lm_head.w (the last stage).
std::size_t block_base(const param_layout& p, int l) {
  return (p.embeddings ? 2 : 0) + per_block * std::size_t(l - p.part.first_block);
}
std::size_t head_base(const param_layout& p) { return block_base(p, p.part.end_block); }
// Units in the flat array's order: the head, the blocks from the last, the embeddings.
constexpr std::size_t head_unit = 0;
std::size_t block_unit(const param_layout& p, int l) {
  return std::size_t(p.part.end_block - 1 - l) + (p.head ? 1 : 0);
}
std::size_t embeddings_unit(const param_layout& p) { return p.units.size() - 1; }

/// Copies entry `e`'s slice for tensor-parallel rank r of tp out of the whole tensor
/// `whole` (of the whole model's shape `shape`).
template <typename T>
void take_slice(std::span<const T> whole, const std::vector<int>& shape, tp_split split, int r,
                int tp, std::span<T> out) {
  const std::size_t rows = std::size_t(shape[0]), cols = shape.size() > 1 ? shape[1] : 1;
  auto copy_rows = [&](std::size_t from, std::size_t n, std::size_t to) {
    std::copy_n(whole.begin() + std::ptrdiff_t(from * cols), n * cols,
                out.begin() + std::ptrdiff_t(to * cols));
  };
  switch (split) {
  case tp_split::none:
    std::copy(whole.begin(), whole.end(), out.begin());
    break;
  case tp_split::rows:
    copy_rows(std::size_t(r) * rows / std::size_t(tp), rows / std::size_t(tp), 0);
    break;
  case tp_split::qkv_rows: // q, k and v: each its heads' rows
    for (std::size_t part = 0; part < 3; ++part)
      copy_rows(part * rows / 3 + std::size_t(r) * rows / 3 / std::size_t(tp),
                rows / 3 / std::size_t(tp), part * rows / 3 / std::size_t(tp));
    break;
  case tp_split::columns: {
    const std::size_t local = cols / std::size_t(tp);
    for (std::size_t i = 0; i < rows; ++i)
      std::copy_n(whole.begin() + std::ptrdiff_t(i * cols + std::size_t(r) * local), local,
                  out.begin() + std::ptrdiff_t(i * local));
    break;
  }
  }
}
} // namespace

param_layout param_layout::of(const gpt_config& c, model_part part) {
  c.check();
  if (part.end_block < 0) part.end_block = c.blocks;
  const std::string where = "model part of " + c.to_string();
  if (part.tp < 1 || part.tp_rank < 0 || part.tp_rank >= part.tp)
    throw argument_error(where, "tensor-parallel rank " + std::to_string(part.tp_rank) + " of " +
                                    std::to_string(part.tp));
  for (auto [what, n] : {std::pair{"heads", c.heads}, std::pair{"channels", c.channels},
                         std::pair{"vocabulary", c.vocabulary}})
    if (n % part.tp != 0)
      throw argument_error(where, "tp=" + std::to_string(part.tp) + " does not divide the " +
                                      std::to_string(n) + " " + what);
  if (part.first_block < 0 || part.first_block >= part.end_block || part.end_block > c.blocks)
    throw argument_error(where, "blocks [" + std::to_string(part.first_block) + ", " +
                                    std::to_string(part.end_block) + ") are not a stage of " +
                                    std::to_string(c.blocks));
  const int V = c.vocabulary / part.tp, C = c.channels, Cl = C / part.tp;
  param_layout p;
  p.config = c;
  p.part = part;
  p.embeddings = part.first_block == 0;
  p.head = part.end_block == c.blocks;
  auto add = [&](std::string name, std::vector<int> shape, tp_split split = tp_split::none,
                 bool projection = false) {
    std::size_t n = 1;
    for (int s : shape) n *= std::size_t(s);
    p.entries.push_back({std::move(name), 0, n, std::move(shape), projection,
                         part.tp > 1 ? split : tp_split::none});
  };
  if (p.embeddings) {
    add("wte", {V, C}, tp_split::rows);
    add("wpe", {c.context, C});
  }
  for (int l = part.first_block; l < part.end_block; ++l) {
    const std::string h = std::string("h").append(std::to_string(l)).append(".");
    add(h + "ln1.w", {C});
    add(h + "ln1.b", {C});
    add(h + "attn.qkv.w", {3 * Cl, C}, tp_split::qkv_rows);
    add(h + "attn.qkv.b", {3 * Cl}, tp_split::qkv_rows);
    add(h + "attn.proj.w", {C, Cl}, tp_split::columns, true);
    add(h + "attn.proj.b", {C});
    add(h + "ln2.w", {C});
    add(h + "ln2.b", {C});
    add(h + "mlp.fc.w", {4 * Cl, C}, tp_split::rows);
    add(h + "mlp.fc.b", {4 * Cl}, tp_split::rows);
    add(h + "mlp.proj.w", {C, 4 * Cl}, tp_split::columns, true);
    add(h + "mlp.proj.b", {C});
  }
  if (p.head) {
    add("lnf.w", {C});
    add("lnf.b", {C});
    add("lm_head.w", {V, C}, tp_split::rows);
  }
  for (auto e = p.entries.rbegin(); e != p.entries.rend(); ++e) { // reverse order in memory
    e->offset = p.total;
    p.total += e->count;
  }
  auto unit = [&](std::string name, std::size_t first, std::size_t end) {
    std::size_t count = 0;
    for (std::size_t i = first; i < end; ++i) count += p.entries[i].count;
    p.units.push_back({std::move(name), p.entries[end - 1].offset, count, first, end});
  };
  if (p.head) unit("head", head_base(p), p.entries.size());
  for (int l = part.end_block - 1; l >= part.first_block; --l)
    unit(std::string("h").append(std::to_string(l)), block_base(p, l), block_base(p, l + 1));
  if (p.embeddings) unit("embeddings", 0, 2);
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
gpt<T>::block_acts::block_acts(std::size_t N, std::size_t C, std::size_t Cl, std::size_t F,
                               std::size_t att_size) {
  std::size_t at = 0;
  auto take = [&](std::size_t n) { return std::exchange(at, at + n); };
  ln1 = take(N * C), ln1_mean = take(N), ln1_rstd = take(N), qkv = take(3 * N * Cl);
  att = take(att_size), atty = take(N * Cl), res2 = take(N * C), ln2 = take(N * C);
  ln2_mean = take(N), ln2_rstd = take(N), fch = take(N * F), fch_gelu = take(N * F);
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
void initialise_unit(const param_layout& layout, std::uint64_t seed, std::size_t unit,
                     std::span<T> out) {
  const param_unit& u = layout.units.at(unit);
  if (out.size() != u.count)
    throw argument_error("initialise_unit", "unit " + u.name + " holds " + std::to_string(u.count) +
                                                " elements, given " + std::to_string(out.size()));
  if (!layout.whole()) { // the whole model's unit, then this part's slice of each tensor
    const param_layout whole = param_layout::of(layout.config);
    const auto it = std::find_if(whole.units.begin(), whole.units.end(),
                                 [&](const param_unit& w) { return w.name == u.name; });
    std::vector<T> values(it->count);
    initialise_unit<T>(whole, seed, std::size_t(it - whole.units.begin()), values);
    for (std::size_t i = u.first_entry; i < u.end_entry; ++i) {
      const param_entry& e = layout.entries[i];
      const param_entry& w = whole.at(e.name);
      take_slice<T>(std::span<const T>(values).subspan(w.offset - it->offset, w.count), w.shape,
                    e.split, layout.part.tp_rank, layout.part.tp,
                    out.subspan(e.offset - u.offset, e.count));
    }
    return;
  }
  // Entries in registration order, each from one stream (matrices draw, vectors do not):
  // the values depend on the seed and the model's shape only.
  std::uint64_t drawn = 0;
  for (std::size_t i = 0; i < u.first_entry; ++i)
    if (layout.entries[i].shape.size() != 1) drawn += layout.entries[i].count;
  normal_source rng(seed, drawn);
  const double proj_std = 0.02 / std::sqrt(2.0 * layout.config.blocks);
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
    : gpt(c, max_batch, hold_params, {}, std::nullopt, 1) {}

template <typename T>
gpt<T>::gpt(const gpt_config& c, int max_batch, bool hold_params, const model_part& part,
            std::optional<mesh> tp, int slots)
    : config_(c), layout_(param_layout::of(c, part)), tp_(std::move(tp)), max_batch_(max_batch),
      rows_(std::size_t(max_batch) * std::size_t(c.context)),
      block_(rows_, std::size_t(c.channels), std::size_t(c.channels / layout_.part.tp),
             std::size_t(4 * c.channels / layout_.part.tp),
             std::size_t(max_batch) * std::size_t(c.heads / layout_.part.tp) * c.context *
                 c.context),
      lnf_at_(rows_ * std::size_t(c.channels) +
              block_.size * std::size_t(layout_.part.end_block - layout_.part.first_block)) {
  if (max_batch < 1)
    throw argument_error("gpt", "the batch must be positive, not " + std::to_string(max_batch));
  if (slots < 1)
    throw argument_error("gpt", "slots must be positive, not " + std::to_string(slots));
  if (layout_.part.tp > 1 && (!tp_ || tp_->size() != layout_.part.tp))
    throw argument_error("gpt", "a part of tp=" + std::to_string(layout_.part.tp) +
                                    " needs its tensor-parallel group of that size");
  const std::size_t N = rows_, C = std::size_t(c.channels);
  params_.resize(hold_params ? layout_.total : 0);
  slots_.resize(std::size_t(slots));
  for (auto& st : slots_) {
    // the input (or embedding output), the blocks, then lnf, lnf_mean, lnf_rstd
    st.acts.resize(lnf_at_ + (layout_.head ? N * C + 2 * N : 0));
    if (layout_.head) st.probs.resize(N * std::size_t(c.vocabulary / layout_.part.tp));
  }
  // dres, dln, datty, dqkv, dfch, dfch_gelu, attention's 2·T·T
  scratch_.resize(N * C * 14 + 2 * std::size_t(c.context) * c.context);
  unit_params_.resize(layout_.units.size());
  unit_grads_.resize(layout_.units.size());
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
typename gpt<T>::slot_state& gpt<T>::slot(int s) {
  if (s < 0 || std::size_t(s) >= slots_.size())
    throw argument_error("gpt", "activation slot " + std::to_string(s) + " of " +
                                    std::to_string(slots_.size()));
  return slots_[std::size_t(s)];
}

template <typename T>
int gpt<T>::vocabulary_row(int token) const noexcept {
  const int rows = config_.vocabulary / layout_.part.tp, row = token - layout_.part.tp_rank * rows;
  return row >= 0 && row < rows ? row : -1;
}

template <typename T>
void gpt<T>::all_reduce(std::span<T> x) const {
  if (layout_.part.tp > 1) co_sum(*tp_, x);
}

template <typename T>
void gpt<T>::initialise(std::uint64_t seed) {
  if (params_.size() != layout_.total)
    throw state_error("gpt::initialise", "this model holds no parameters (a sharded one)");
  for (std::size_t u = 0; u < layout_.units.size(); ++u)
    initialise_unit<T>(
        layout_, seed, u,
        std::span<T>(params_).subspan(layout_.units[u].offset, layout_.units[u].count));
}

template <typename T>
T gpt<T>::forward(std::span<const int> inputs, std::span<const int> targets, int batch) {
  return forward_part(0, inputs, {}, targets, batch);
}

template <typename T>
T gpt<T>::forward_part(int slot, std::span<const int> inputs, std::span<const T> input,
                       std::span<const int> targets, int batch) {
  if (params_.size() != layout_.total)
    throw state_error("gpt::forward", "this model holds no parameters: pass their source");
  flat_source all(layout_, params_, {}, nullptr);
  return forward_part(slot, inputs, input, targets, batch, all);
}

template <typename T>
T gpt<T>::forward(std::span<const int> inputs, std::span<const int> targets, int batch,
                  unit_source<T>& source) {
  return forward_part(0, inputs, {}, targets, batch, source);
}

template <typename T>
std::span<const T> gpt<T>::output(int s) const {
  const slot_state& st = const_cast<gpt&>(*this).slot(s);
  const std::size_t NC = std::size_t(st.batch) * config_.context * config_.channels;
  return layout_.part.end_block > layout_.part.first_block
             ? block_field(std::span<const T>(st.acts), layout_.part.end_block - 1, block_.res3, NC)
             : std::span<const T>(st.acts).first(NC);
}

template <typename T>
T gpt<T>::cross_entropy(slot_state& st, int N) {
  const int Vl = config_.vocabulary / layout_.part.tp;
  std::span<T> probs = std::span<T>(st.probs).first(std::size_t(N) * Vl);
  const bool sample = st.targets.empty(); // probabilities only
  const std::vector<int> none(sample ? std::size_t(N) : 0, 0);
  const std::span<const int> targets = sample ? std::span<const int>(none) : st.targets;
  if (layout_.part.tp == 1) {
    const T loss = nn::cross_entropy_forward<T>(probs, targets, N, Vl);
    return sample ? T(0) : loss;
  }
  // Vocabulary-parallel (Megatron): the row maximum, the sum of exponentials and the
  // target's probability, each reduced over tp; every rank gets the same loss.
  std::vector<T> mx(static_cast<std::size_t>(N)), sum(mx.size()), target(mx.size());
  for (int n = 0; n < N; ++n) {
    const T* p = probs.data() + std::size_t(n) * Vl;
    mx[std::size_t(n)] = *std::max_element(p, p + Vl);
  }
  co_max(*tp_, std::span<T>(mx));
  for (int n = 0; n < N; ++n) {
    T* p = probs.data() + std::size_t(n) * Vl;
    for (int v = 0; v < Vl; ++v) sum[std::size_t(n)] += p[v] = std::exp(p[v] - mx[std::size_t(n)]);
  }
  co_sum(*tp_, std::span<T>(sum));
  for (int n = 0; n < N; ++n) {
    T* p = probs.data() + std::size_t(n) * Vl;
    const T inv = T(1) / sum[std::size_t(n)];
    for (int v = 0; v < Vl; ++v) p[v] *= inv;
    if (const int t = vocabulary_row(targets[std::size_t(n)]); t >= 0)
      target[std::size_t(n)] = p[t];
  }
  if (sample) return T(0);
  co_sum(*tp_, std::span<T>(target));
  double loss = 0;
  for (int n = 0; n < N; ++n) loss -= std::log(double(target[std::size_t(n)]));
  return T(loss / N);
}

template <typename T>
T gpt<T>::forward_part(int s, std::span<const int> inputs, std::span<const T> input,
                       std::span<const int> targets, int batch, unit_source<T>& source) {
  const gpt_config& c = config_;
  const param_layout& pl = layout_;
  slot_state& st = slot(s);
  const std::size_t tokens = std::size_t(batch) * std::size_t(c.context);
  const std::size_t given = pl.embeddings ? inputs.size() : input.size() / std::size_t(c.channels);
  if (batch < 1 || batch > max_batch_ || given != tokens ||
      (!targets.empty() && targets.size() != tokens))
    throw argument_error("gpt::forward",
                         "a batch of " + std::to_string(batch) + " samples (at most " +
                             std::to_string(max_batch_) + ") needs " + std::to_string(tokens) +
                             " tokens, given " + std::to_string(given) + " inputs and " +
                             std::to_string(targets.size()) + " targets");
  st.batch = batch;
  st.inputs.assign(inputs.begin(), inputs.end());
  st.targets.assign(targets.begin(), targets.end());
  const int tp = pl.part.tp, B = batch, T_ = c.context, C = c.channels, Cl = C / tp, F = 4 * C / tp,
            NH = c.heads / tp, Vl = c.vocabulary / tp;
  const int N = B * T_;
  const std::size_t NC = std::size_t(N) * C, NCl = std::size_t(N) * Cl, Nmax = rows_;
  const block_acts& ba = block_;
  std::span<T> acts(st.acts);
  auto at = [&](std::size_t offset, std::size_t n) { return acts.subspan(offset, n); };
  auto block = [&](int l, std::size_t field, std::size_t n) {
    return block_field(acts, l, field, n);
  };
  auto cp = [](std::span<T> x) { return std::span<const T>(x); };
  // A row-parallel layer: each rank's partial product, summed over tp, then the bias.
  auto row_parallel = [&](std::span<T> out, std::span<const T> inp, std::size_t w, std::size_t bias,
                          int K) {
    if (tp == 1) return nn::linear_forward<T>(out, inp, param(w), param(bias), N, K, C);
    nn::linear_forward<T>(out, inp, param(w), {}, N, K, C);
    all_reduce(out);
    const auto b = param(bias);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < C; ++o) out[std::size_t(n) * C + o] += b[std::size_t(o)];
  };

  if (pl.embeddings) {
    enter(source, embeddings_unit(pl), pass::forward);
    if (tp == 1) {
      nn::embedding_forward<T>(at(0, NC), inputs, param(0), param(1), B, T_, C);
    } else { // vocabulary-parallel: each rank its rows, zeros elsewhere, summed over tp
      const auto wte = param(0), wpe = param(1);
      auto out = at(0, NC);
      std::fill(out.begin(), out.end(), T(0));
      for (std::size_t i = 0; i < tokens; ++i)
        if (const int v = vocabulary_row(inputs[i]); v >= 0)
          std::copy_n(wte.begin() + std::ptrdiff_t(std::size_t(v) * C), C,
                      out.begin() + std::ptrdiff_t(i * C));
      all_reduce(out);
      for (std::size_t i = 0; i < tokens; ++i)
        for (int k = 0; k < C; ++k) out[i * C + k] += wpe[(i % std::size_t(T_)) * C + k];
    }
    source.release(embeddings_unit(pl), pass::forward);
  } else {
    std::copy(input.begin(), input.end(), acts.begin()); // the previous stage's output
  }
  std::span<const T> x = cp(at(0, NC));
  for (int l = pl.part.first_block; l < pl.part.end_block; ++l) {
    const std::size_t p = block_base(pl, l);
    enter(source, block_unit(pl, l), pass::forward);
    auto ln1 = block(l, ba.ln1, NC), qkv = block(l, ba.qkv, 3 * NCl);
    auto att = block(l, ba.att, std::size_t(B) * NH * T_ * T_), atty = block(l, ba.atty, NCl);
    auto res2 = block(l, ba.res2, NC), ln2 = block(l, ba.ln2, NC);
    auto fch = block(l, ba.fch, std::size_t(N) * F),
         fch_gelu = block(l, ba.fch_gelu, std::size_t(N) * F);
    auto res3 = block(l, ba.res3, NC);
    nn::layer_norm_forward<T>(ln1, block(l, ba.ln1_mean, N), block(l, ba.ln1_rstd, N), x,
                              param(p + ln1_w), param(p + ln1_b), N, C);
    nn::linear_forward<T>(qkv, cp(ln1), param(p + qkv_w), param(p + qkv_b), N, C, 3 * Cl);
    nn::attention_forward<T>(atty, att, cp(qkv), B, T_, Cl, NH);
    row_parallel(res2, cp(atty), p + attn_proj_w, p + attn_proj_b, Cl);
    nn::residual_forward<T>(res2, cp(res2), x);
    nn::layer_norm_forward<T>(ln2, block(l, ba.ln2_mean, N), block(l, ba.ln2_rstd, N), cp(res2),
                              param(p + ln2_w), param(p + ln2_b), N, C);
    nn::linear_forward<T>(fch, cp(ln2), param(p + fc_w), param(p + fc_b), N, C, F);
    nn::gelu_forward<T>(fch_gelu, cp(fch));
    row_parallel(res3, cp(fch_gelu), p + mlp_proj_w, p + mlp_proj_b, F);
    nn::residual_forward<T>(res3, cp(res3), cp(res2));
    source.release(block_unit(pl, l), pass::forward);
    x = cp(res3);
  }
  if (!pl.head) return T(0);
  const std::size_t head = head_base(pl);
  enter(source, head_unit, pass::forward);
  auto lnf = at(lnf_at_, NC);
  nn::layer_norm_forward<T>(lnf, at(lnf_at_ + Nmax * C, N), at(lnf_at_ + Nmax * C + Nmax, N), x,
                            param(head), param(head + 1), N, C);
  nn::linear_forward<T>(std::span<T>(st.probs).first(std::size_t(N) * Vl), cp(lnf), param(head + 2),
                        {}, N, C, Vl);
  source.release(head_unit, pass::forward);
  return cross_entropy(st, N);
}

template <typename T>
void gpt<T>::backward(std::span<T> grads, T loss_scale,
                      const std::function<void(std::size_t)>& ready) {
  backward_part(0, loss_scale, {}, {}, grads, ready);
}

template <typename T>
void gpt<T>::backward_part(int slot, T loss_scale, std::span<const T> dout, std::span<T> dinput,
                           std::span<T> grads, const std::function<void(std::size_t)>& ready) {
  if (grads.size() != layout_.total)
    throw argument_error("gpt::backward", "the gradient holds " + std::to_string(grads.size()) +
                                              " elements, the parameters " +
                                              std::to_string(layout_.total));
  if (params_.size() != layout_.total)
    throw state_error("gpt::backward", "this model holds no parameters: pass their source");
  flat_source all(layout_, params_, grads, &ready);
  backward_part(slot, loss_scale, dout, dinput, all);
}

template <typename T>
void gpt<T>::backward(T loss_scale, unit_source<T>& source) {
  backward_part(0, loss_scale, {}, {}, source);
}

template <typename T>
void gpt<T>::backward_part(int s, T loss_scale, std::span<const T> dout, std::span<T> dinput,
                           unit_source<T>& source) {
  const gpt_config& c = config_;
  const param_layout& pl = layout_;
  slot_state& st = slot(s);
  const int tp = pl.part.tp, B = st.batch, T_ = c.context, C = c.channels, Cl = C / tp,
            F = 4 * C / tp, NH = c.heads / tp, Vl = c.vocabulary / tp;
  const int N = B * T_;
  const std::size_t NC = std::size_t(N) * C, NCl = std::size_t(N) * Cl, NF = std::size_t(N) * F,
                    Nmax = rows_;
  if (B == 0 || (pl.head && st.targets.empty()))
    throw state_error("gpt::backward", "no forward with targets to go back through");
  if ((!pl.head && dout.size() != NC) || (!pl.embeddings && dinput.size() != NC))
    throw argument_error("gpt::backward", "a stage's output and input gradients hold " +
                                              std::to_string(NC) + " elements, given " +
                                              std::to_string(dout.size()) + " and " +
                                              std::to_string(dinput.size()));
  const block_acts& ba = block_;
  std::span<const T> acts(st.acts);
  auto block = [&](int l, std::size_t field, std::size_t n) {
    return block_field(acts, l, field, n);
  };
  auto cp = [](std::span<T> x) { return std::span<const T>(x); };
  auto zero = [](std::span<T> x) { std::memset(x.data(), 0, x.size_bytes()); };
  std::span<T> sc(scratch_);
  std::span<T> dres = sc.subspan(0, NC), dln = sc.subspan(Nmax * C, NC);
  std::span<T> datty = sc.subspan(2 * Nmax * C, NCl), dqkv = sc.subspan(3 * Nmax * C, 3 * NCl);
  std::span<T> dfch = sc.subspan(6 * Nmax * C, NF);
  std::span<T> dfch_gelu = sc.subspan(10 * Nmax * C, NF);
  std::span<T> att_scratch = sc.subspan(14 * Nmax * C, 2 * std::size_t(T_) * T_);
  const int first = pl.part.first_block, end = pl.part.end_block;

  if (pl.head) {
    const std::size_t head = head_base(pl);
    const std::span<const T> last = block(end - 1, ba.res3, NC);
    std::span<T> dlogits = std::span<T>(st.probs).first(std::size_t(N) * Vl);
    if (tp == 1) {
      nn::cross_entropy_backward<T>(dlogits, st.targets, N, Vl, loss_scale / T(N));
    } else { // this rank's vocabulary rows of (p - onehot) · scale
      const T scale = loss_scale / T(N);
      for (int n = 0; n < N; ++n) {
        T* p = dlogits.data() + std::size_t(n) * Vl;
        if (const int t = vocabulary_row(st.targets[std::size_t(n)]); t >= 0) p[t] -= T(1);
        for (int v = 0; v < Vl; ++v) p[v] *= scale;
      }
    }
    enter(source, head_unit, pass::backward);
    zero(dln);
    nn::linear_backward<T>(dln, grad(head + 2), {}, cp(dlogits), acts.subspan(lnf_at_, NC),
                           param(head + 2), N, C, Vl);
    all_reduce(dln);
    zero(dres);
    nn::layer_norm_backward<T>(dres, grad(head), grad(head + 1), cp(dln), last, param(head),
                               acts.subspan(lnf_at_ + Nmax * C, N),
                               acts.subspan(lnf_at_ + Nmax * C + Nmax, N), N, C);
    source.release(head_unit, pass::backward);
  } else {
    std::copy(dout.begin(), dout.end(), dres.begin()); // the next stage's gradient
  }
  for (int l = end - 1; l >= first; --l) {
    const std::size_t p = block_base(pl, l);
    const std::span<const T> x = l > first ? block(l - 1, ba.res3, NC) : acts.subspan(0, NC);
    enter(source, block_unit(pl, l), pass::backward);
    zero(dfch_gelu);
    nn::linear_backward<T>(dfch_gelu, grad(p + mlp_proj_w), grad(p + mlp_proj_b), cp(dres),
                           block(l, ba.fch_gelu, NF), param(p + mlp_proj_w), N, F, C);
    zero(dfch);
    nn::gelu_backward<T>(dfch, block(l, ba.fch, NF), cp(dfch_gelu));
    zero(dln);
    nn::linear_backward<T>(dln, grad(p + fc_w), grad(p + fc_b), cp(dfch), block(l, ba.ln2, NC),
                           param(p + fc_w), N, C, F);
    all_reduce(dln);
    nn::layer_norm_backward<T>(dres, grad(p + ln2_w), grad(p + ln2_b), cp(dln),
                               block(l, ba.res2, NC), param(p + ln2_w), block(l, ba.ln2_mean, N),
                               block(l, ba.ln2_rstd, N), N, C);
    zero(datty);
    nn::linear_backward<T>(datty, grad(p + attn_proj_w), grad(p + attn_proj_b), cp(dres),
                           block(l, ba.atty, NCl), param(p + attn_proj_w), N, Cl, C);
    zero(dqkv);
    nn::attention_backward<T>(dqkv, att_scratch, cp(datty), block(l, ba.qkv, 3 * NCl),
                              block(l, ba.att, std::size_t(B) * NH * T_ * T_), B, T_, Cl, NH);
    zero(dln);
    nn::linear_backward<T>(dln, grad(p + qkv_w), grad(p + qkv_b), cp(dqkv), block(l, ba.ln1, NC),
                           param(p + qkv_w), N, C, 3 * Cl);
    all_reduce(dln);
    nn::layer_norm_backward<T>(dres, grad(p + ln1_w), grad(p + ln1_b), cp(dln), x, param(p + ln1_w),
                               block(l, ba.ln1_mean, N), block(l, ba.ln1_rstd, N), N, C);
    source.release(block_unit(pl, l), pass::backward);
  }
  if (!pl.embeddings) {
    std::copy(dres.begin(), dres.end(), dinput.begin()); // for the previous stage
    return;
  }
  enter(source, embeddings_unit(pl), pass::backward);
  if (tp == 1) {
    nn::embedding_backward<T>(grad(0), grad(1), cp(dres), st.inputs, B, T_, C);
  } else { // this rank's vocabulary rows; the positions' gradient is the same on every rank
    const auto dwte = grad(0), dwpe = grad(1);
    for (std::size_t i = 0; i < std::size_t(N); ++i) {
      const int v = vocabulary_row(st.inputs[i]);
      for (int k = 0; k < C; ++k) {
        if (v >= 0) dwte[std::size_t(v) * C + k] += dres[i * C + k];
        dwpe[(i % std::size_t(T_)) * C + k] += dres[i * C + k];
      }
    }
  }
  source.release(embeddings_unit(pl), pass::backward);
}

template class gpt<float>;
template class gpt<double>;
template void initialise_unit<float>(const param_layout&, std::uint64_t, std::size_t,
                                     std::span<float>);
template void initialise_unit<double>(const param_layout&, std::uint64_t, std::size_t,
                                      std::span<double>);

} // namespace crown::parallel
