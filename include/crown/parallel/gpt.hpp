// include/crown/parallel/gpt.hpp — a character-level GPT (pre-LN blocks, learned positions, an
// untied output layer) with a manual backward; its parameters are one flat array laid out by
// one param_layout, which buckets, optimizers and checkpoints share.
#pragma once
#include <crown/mesh.hpp>
#include <crown/parallel/memory.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
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

/// The part of a model one worker holds, as Megatron lays it out: the blocks of its
/// pipeline stage, the embeddings on the first stage and the output layer on the last;
/// and, of each, its tensor-parallel slice: attention heads, the MLP's hidden columns and
/// the vocabulary split over tp, layer norms, position embeddings and the biases after a
/// row-parallel layer whole. The default is the whole model.
struct model_part {
  int tp_rank = 0, tp = 1;
  int first_block = 0, end_block = -1; ///< [first, end) of the blocks; -1: to the last
  friend bool operator==(const model_part&, const model_part&) = default;
};

/// How a tensor is cut over tp: not at all, by rows (column-parallel weights and their
/// biases, vocabulary rows), by rows within each of q, k and v, or by columns
/// (row-parallel weights).
enum class tp_split : unsigned char { none, rows, qkv_rows, columns };

/// One parameter tensor of the flat parameter array.
struct param_entry {
  std::string name;           ///< "h3.attn.qkv.w"
  std::size_t offset = 0;     ///< into the flat array
  std::size_t count = 0;      ///< elements
  std::vector<int> shape;     ///< row-major, this part's slice
  bool is_projection = false; ///< a residual output projection (initialised smaller)
  tp_split split = tp_split::none;
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
  gpt_config config;
  model_part part;                     ///< end_block resolved
  bool embeddings = true, head = true; ///< the first stage's, the last stage's
  std::vector<param_entry> entries;
  std::vector<param_unit> units;    ///< the flat array's order
  std::vector<std::size_t> unit_of; ///< entry -> unit
  std::size_t total = 0;
  /// Throws argument_error naming the numbers when `part` does not fit `c` (tp not
  /// dividing heads, channels or vocabulary; blocks out of range).
  [[nodiscard]] static param_layout of(const gpt_config& c, model_part part = {});
  [[nodiscard]] bool whole() const noexcept {
    return part.tp == 1 && part.first_block == 0 && part.end_block == config.blocks;
  }
  [[nodiscard]] const param_entry& at(std::string_view name) const;
};

/// GPT-2's initialisation of unit `unit` (see gpt::initialise) into `out` (its count
/// elements): each unit on its own, bitwise as when the whole model is initialised (a
/// part's slice of the whole model's values), so that a sharded model never holds more
/// than one unit whole.
template <typename T>
void initialise_unit(const param_layout& layout, std::uint64_t seed, std::size_t unit,
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

/// The model, or one worker's part of it (model_part): parameters, saved activations for
/// `slots` micro-batches of up to `max_batch` samples each, and forward/backward over them.
/// A tensor-parallel part all-reduces over its tp group as Megatron does: once after each
/// row-parallel layer in forward (attention's and the MLP's output projections, the
/// vocabulary-parallel embedding) and once before each column-parallel layer's input
/// gradient is used in backward, plus the vocabulary-parallel cross-entropy's three
/// per-row reductions. T is float or double.
template <typename T>
class gpt {
public:
  /// `hold_params`: false for a sharded model (FSDP), whose parameters come from a
  /// unit_source; params() is then empty.
  gpt(const gpt_config& c, int max_batch, bool hold_params = true);
  /// Part `part` of the model; `tp` is its tensor-parallel group (part.tp images, this
  /// one part.tp_rank), needed when part.tp > 1.
  gpt(const gpt_config& c, int max_batch, bool hold_params, const model_part& part,
      std::optional<mesh> tp, int slots);
  [[nodiscard]] const gpt_config& config() const noexcept { return config_; }
  [[nodiscard]] const param_layout& layout() const noexcept { return layout_; }
  [[nodiscard]] std::span<T> params() noexcept { return params_; }
  [[nodiscard]] std::span<const T> params() const noexcept { return params_; }

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
  /// One micro-batch through this part, its activations kept in `slot`: from tokens
  /// (`inputs`: the first stage) or from the previous stage's output (`input`: batch x T x C),
  /// to the mean loss over `targets` on the last stage (0 on the others, and without
  /// targets).
  T forward_part(int slot, std::span<const int> inputs, std::span<const T> input,
                 std::span<const int> targets, int batch, unit_source<T>& source);
  /// The same over the parameters this model holds.
  T forward_part(int slot, std::span<const int> inputs, std::span<const T> input,
                 std::span<const int> targets, int batch);
  /// What slot's forward handed on (batch x T x C): the next stage's input.
  [[nodiscard]] std::span<const T> output(int slot) const;
  /// Probabilities (batch, T, V) of the last forward without targets (this part's
  /// vocabulary rows under tensor parallelism).
  [[nodiscard]] std::span<const T> probabilities() const noexcept { return slots_[0].probs; }
  /// Backward of the last forward, accumulating into `grads` (laid out like params())
  /// the gradient of loss · loss_scale. Calls ready(i) once entry i's gradient is final,
  /// in reverse entry order (the order of the flat array).
  void backward(std::span<T> grads, T loss_scale, const std::function<void(std::size_t)>& ready);
  /// The same over parameters and gradients from `source`.
  void backward(T loss_scale, unit_source<T>& source);
  /// Backward of slot's forward: from its loss times loss_scale (the last stage) or from
  /// `dout`, the gradient of output(slot); stages after the first leave the gradient of
  /// their input in `dinput` (batch x T x C).
  void backward_part(int slot, T loss_scale, std::span<const T> dout, std::span<T> dinput,
                     unit_source<T>& source);
  /// The same over the parameters this model holds, into `grads` (ready(i) as above).
  void backward_part(int slot, T loss_scale, std::span<const T> dout, std::span<T> dinput,
                     std::span<T> grads, const std::function<void(std::size_t)>& ready);

private:
  /// Offsets of one block's saved activations (N rows, C channels, this part's Cl = C/tp
  /// attention channels and F = 4C/tp MLP columns), in elements.
  struct block_acts {
    std::size_t ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, res3, size;
    block_acts(std::size_t N, std::size_t C, std::size_t Cl, std::size_t F, std::size_t att_size);
  };
  /// One micro-batch in flight: its activations and tokens.
  struct slot_state {
    tracked_vector<T> acts = tracked<T>(buffer_kind::activations);
    // (batch, T, V/tp): probabilities, then their gradient (the last stage)
    tracked_vector<T> probs = tracked<T>(buffer_kind::activations);
    std::vector<int> inputs, targets;
    int batch = 0;
  };
  class flat_source;
  /// Entry `entry` of the unit acquired last (its parameters, its gradient).
  [[nodiscard]] std::span<const T> param(std::size_t entry) const noexcept;
  [[nodiscard]] std::span<T> grad(std::size_t entry) const noexcept;
  void enter(unit_source<T>& source, std::size_t unit, pass p);
  [[nodiscard]] slot_state& slot(int s);
  void all_reduce(std::span<T> x) const; ///< sum over the tp group (nothing when tp = 1)
  /// The row of `token` in this part's vocabulary slice, or -1 when another tp rank has it.
  [[nodiscard]] int vocabulary_row(int token) const noexcept;
  T cross_entropy(slot_state& st, int N);
  /// Block l's (a global block index) activation `field` (n elements) in `acts`.
  template <typename Span>
  Span block_field(Span acts, int l, std::size_t field, std::size_t n) const {
    return acts.subspan(rows_ * std::size_t(config_.channels) +
                            block_.size * std::size_t(l - layout_.part.first_block) + field,
                        n);
  }
  gpt_config config_;
  param_layout layout_;
  std::optional<mesh> tp_;
  int max_batch_;
  std::size_t rows_;   // max_batch x context: the rows every activation is sized for
  block_acts block_;   // one block's layout; the blocks follow the embedding output
  std::size_t lnf_at_; // the final layer norm's output, then its mean and 1/std
  tracked_vector<T> params_ = tracked<T>(buffer_kind::params);
  std::vector<slot_state> slots_;
  tracked_vector<T> scratch_ = tracked<T>(buffer_kind::activations);
  std::vector<std::span<const T>> unit_params_; // per unit, while acquired
  std::vector<std::span<T>> unit_grads_;
};

} // namespace crown::parallel
