// include/crown/parallel/gpt.hpp — a character-level GPT (pre-LN blocks, learned positions, an
// untied output layer) with a manual backward; its parameters are one flat array laid out by
// one param_layout, which buckets, optimizers and checkpoints share.
#pragma once
#include <crown/parallel/memory.hpp>
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

/// A contiguous run of the flat array that FSDP gathers and shards as one (PyTorch's
/// FlatParameter of one wrapped module): the output layer with the final layer norm, each
/// block, the embeddings, in the flat array's order (backward's).
struct param_unit {
  std::string name;                           ///< "head", "h3", "embeddings"
  std::size_t offset = 0, count = 0;          ///< elements of the flat array
  std::size_t first_entry = 0, end_entry = 0; ///< its entries [first, end), registration order
};

/// Where each parameter lives in the flat array. Entries are in registration (forward)
/// order, as PyTorch's model.parameters(); the flat array holds them in *reverse* order
/// (the output layer first, the embeddings last), so that every gradient bucket, assigned
/// in reverse parameter order as DDP does, is one contiguous range of it, and backward
/// fills it front to back.
struct param_layout {
  std::vector<param_entry> entries;
  std::vector<param_unit> units;    ///< the flat array's order
  std::vector<std::size_t> unit_of; ///< entry -> unit
  std::size_t total = 0;
  [[nodiscard]] static param_layout of(const gpt_config& c);
  [[nodiscard]] const param_entry& at(std::string_view name) const;
};

/// GPT-2's initialisation of unit `unit` (see gpt::initialise) into `out` (its count
/// elements): each unit on its own, bitwise as when the whole model is initialised, so
/// that a sharded model never holds more than one unit whole.
template <typename T>
void initialise_unit(const param_layout& layout, int blocks, std::uint64_t seed, std::size_t unit,
                     std::span<T> out);

enum class pass { forward, backward };

/// Where forward and backward find each unit's parameters and gradient. gpt calls
/// acquire(u) before it reads unit u and release(u) once done with it, in forward order
/// (embeddings first) or backward order (output layer first); in backward, gradient(u)
/// between them. DDP's source points into flat arrays; FSDP's gathers and reduce-scatters.
template <typename T>
class unit_source {
public:
  virtual ~unit_source() = default;
  /// The unit's parameters (count elements), valid until release(u, p).
  virtual std::span<const T> acquire(std::size_t unit, pass p) = 0;
  /// Where the unit's gradient accumulates (count elements; += as nn.hpp does).
  virtual std::span<T> gradient(std::size_t unit) = 0;
  virtual void release(std::size_t unit, pass p) = 0;
};

/// The model: parameters, saved activations for a batch of up to `max_batch` samples, and
/// forward/backward over them. T is float or double.
template <typename T>
class gpt {
public:
  /// `hold_params`: false for a sharded model (FSDP), whose parameters come from a
  /// unit_source; params() is then empty.
  gpt(const gpt_config& c, int max_batch, bool hold_params = true);
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
  /// The same over parameters from `source`.
  T forward(std::span<const int> inputs, std::span<const int> targets, int batch,
            unit_source<T>& source);
  /// Probabilities (batch, T, V) of the last forward without targets.
  [[nodiscard]] std::span<const T> probabilities() const noexcept { return probs_; }
  /// Backward of the last forward, accumulating into `grads` (laid out like params())
  /// the gradient of loss · loss_scale. Calls ready(i) once entry i's gradient is final,
  /// in reverse entry order (the order of the flat array).
  void backward(std::span<T> grads, T loss_scale, const std::function<void(std::size_t)>& ready);
  /// The same over parameters and gradients from `source`.
  void backward(T loss_scale, unit_source<T>& source);

private:
  /// Offsets of one block's saved activations (N rows of C channels), in elements.
  struct block_acts {
    std::size_t ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, res3, size;
    block_acts(std::size_t N, std::size_t C, std::size_t att_size);
  };
  class flat_source;
  /// Entry `entry` of the unit acquired last (its parameters, its gradient).
  [[nodiscard]] std::span<const T> param(std::size_t entry) const noexcept;
  [[nodiscard]] std::span<T> grad(std::size_t entry) const noexcept;
  void enter(unit_source<T>& source, std::size_t unit, pass p);
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
  tracked_vector<T> params_ = tracked<T>(buffer_kind::params);
  tracked_vector<T> acts_ = tracked<T>(buffer_kind::activations); // of the last forward
  // (batch, T, V): probabilities, then their gradient
  tracked_vector<T> probs_ = tracked<T>(buffer_kind::activations);
  tracked_vector<T> scratch_ = tracked<T>(buffer_kind::activations);
  std::vector<std::span<const T>> unit_params_; // per unit, while acquired
  std::vector<std::span<T>> unit_grads_;
  std::vector<int> inputs_, targets_;
};

} // namespace crown::parallel
