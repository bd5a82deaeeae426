// include/crown/parallel/gpt.hpp — a character-level GPT (pre-LN blocks, learned positions, an
// untied output layer) with a manual backward; its parameters are one flat array laid out by
// one param_layout, which buckets, optimizers and checkpoints share.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace crown::parallel {

struct gpt_config {
  int vocabulary = 256; ///< bytes
  int context = 64;     ///< T: tokens per sample
  int channels = 128;   ///< C
  int heads = 4;        ///< NH; must divide C
  int blocks = 4;       ///< L
  /// Throws argument_error naming the field and its value when a size is not positive or
  /// heads do not divide channels.
  void check() const;
  [[nodiscard]] std::string to_string() const; ///< "L=4,C=128,NH=4,T=64,V=256"
};

/// One parameter tensor of the flat parameter array.
struct param_entry {
  std::string name;           ///< "h3.attn.qkv.w"
  std::size_t offset = 0;     ///< into the flat array
  std::size_t count = 0;      ///< elements
  std::vector<int> shape;     ///< row-major
  bool is_projection = false; ///< a residual output projection (initialised smaller)
};

/// Where each parameter lives in the flat array. Entries are in registration (forward)
/// order, as PyTorch's model.parameters(); the flat array holds them in *reverse* order
/// (the output layer first, the embeddings last), so that every gradient bucket, assigned
/// in reverse parameter order as DDP does, is one contiguous range of it, and backward
/// fills it front to back.
struct param_layout {
  std::vector<param_entry> entries;
  std::size_t total = 0;
  [[nodiscard]] static param_layout of(const gpt_config& c);
  [[nodiscard]] const param_entry& at(std::string_view name) const;
};

/// The model: parameters, saved activations for a batch of up to `max_batch` samples, and
/// forward/backward over them. T is float or double.
template <typename T>
class gpt {
public:
  gpt(const gpt_config& c, int max_batch);
  [[nodiscard]] const gpt_config& config() const noexcept { return config_; }
  [[nodiscard]] const param_layout& layout() const noexcept { return layout_; }
  [[nodiscard]] std::span<T> params() noexcept { return params_; }
  [[nodiscard]] std::span<const T> params() const noexcept { return params_; }
  /// Bytes held for activations and backward scratch (max_batch samples).
  [[nodiscard]] std::size_t activation_bytes() const noexcept;

  /// GPT-2's initialisation from `seed`: weights N(0, 0.02), residual projections
  /// N(0, 0.02/sqrt(2L)), biases 0, layer-norm gains 1. The same on every rank.
  void initialise(std::uint64_t seed);

  /// Forward over `batch` samples of T tokens (inputs and targets: batch x T bytes);
  /// returns the mean cross-entropy over the batch·T predictions and keeps what backward
  /// needs. With no targets, leaves next-token probabilities in probabilities().
  T forward(std::span<const int> inputs, std::span<const int> targets, int batch);
  /// Probabilities (batch, T, V) of the last forward without targets.
  [[nodiscard]] std::span<const T> probabilities() const noexcept { return probs_; }
  /// Backward of the last forward, accumulating into `grads` (laid out like params())
  /// the gradient of loss · loss_scale. Calls ready(i) once entry i's gradient is final,
  /// in reverse entry order (the order of the flat array).
  void backward(std::span<T> grads, T loss_scale, const std::function<void(std::size_t)>& ready);

private:
  /// Offsets of one block's saved activations (N rows of C channels), in elements.
  struct block_acts {
    std::size_t ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, res3, size;
    block_acts(std::size_t N, std::size_t C, std::size_t att_size);
  };
  [[nodiscard]] std::span<T> param(std::size_t entry) noexcept;
  /// Block l's activation `field` (n elements) in `acts` (acts_, mutable or const).
  template <typename Span>
  Span block_field(Span acts, int l, std::size_t field, std::size_t n) const {
    return acts.subspan(
        rows_ * std::size_t(config_.channels) + block_.size * std::size_t(l) + field, n);
  }
  gpt_config config_;
  param_layout layout_;
  int max_batch_;
  std::size_t rows_;   // max_batch x context: the rows every activation is sized for
  block_acts block_;   // one block's layout; the blocks follow the embedding output
  std::size_t lnf_at_; // the final layer norm's output, then its mean and 1/std
  int batch_ = 0;
  std::vector<T> params_;
  std::vector<T> acts_;  // activations of the last forward
  std::vector<T> probs_; // (batch, T, V): probabilities, then their gradient
  std::vector<T> scratch_;
  std::vector<int> inputs_, targets_;
};

} // namespace crown::parallel
