// include/crown/parallel/trainer.hpp — one worker's part of training a GPT under a plan:
// the model, its data-parallel gradients, the optimizer and the data order. Apps see only
// step(), evaluate() and sample(); controller-mode actors wrap the same object.
#pragma once
#include <crown/mesh.hpp>
#include <crown/parallel/data.hpp>
#include <crown/parallel/ddp.hpp>
#include <crown/parallel/fsdp.hpp>
#include <crown/parallel/gpt.hpp>
#include <crown/parallel/optim.hpp>
#include <crown/parallel/plan.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace crown {
class checkpoint_writer;
class checkpoint_reader;
} // namespace crown

namespace crown::parallel {

struct train_options {
  gpt_config model;
  parallel::plan plan;
  int batch = 8;                  ///< samples per step and data-parallel rank
  std::uint64_t seed = 1234;      ///< initialisation and sample order
  std::string optimizer = "adam"; ///< adam or sgd
  double lr = 1e-3;
  ddp_options ddp;
};

/// Where a pipeline stage's last step went: all of it, and the part spent waiting for
/// the neighbouring stages (receiving, or for a send's buffer): 1F1B's bubble, ideally
/// (p - 1) / (m + p - 1) of the step with equal stages.
struct pipeline_timing {
  double step_seconds = 0, waited_seconds = 0;
  [[nodiscard]] double bubble() const noexcept {
    return step_seconds > 0 ? waited_seconds / step_seconds : 0;
  }
};

/// Checks `o` against a job of `workers` workers: the plan (validate()), the model's
/// sizes, the optimizer's name and the learning rate; throws argument_error naming the
/// numbers and the rule. Needs no communication, so every rank fails alike, before work.
void check_options(const train_options& o, int workers);

/// Collective over `workers` at construction (the plan's mesh, DDP's broadcast).
template <typename T>
class trainer {
public:
  trainer(const mesh& workers, std::shared_ptr<const corpus> data, train_options o);

  /// One optimizer step over the next global batch (dp x batch samples); returns this
  /// worker's mean loss over its samples. Strikes CROWN_FAULT's `step` point first.
  T step();
  /// The mean of one value per data-parallel rank (the global loss from step()'s),
  /// bitwise the same everywhere. Collective over the data-parallel group.
  T average(T local);
  /// Mean validation loss over `batches` batches per data-parallel rank. Collective.
  T evaluate(int batches);
  /// `length` bytes continuing `prompt`, sampled at `temperature`; deterministic given
  /// `seed`. Local under DDP; collective under FSDP (the units are gathered) and over the
  /// tensor- and pipeline-parallel groups (the stages run in turn, the vocabulary's rows
  /// are gathered, the last stage's choice is broadcast): every worker gets the same text.
  std::string sample(const std::string& prompt, int length, double temperature, std::uint64_t seed);

  /// Writes the training state into `w` (collective over the workers, `w`'s mesh): the
  /// parameters and optimizer state, one dataset per unit ("params.h3", "adam.m.head"),
  /// each element stored once (written by one replica under DDP, by its shard's owners
  /// under FSDP, so any strategy loads what any other saved), and as metadata the steps done, the
  /// data position (samples of the stream consumed), the seed, the plan, the model, the optimizer
  /// and the element type. Samples are a function of the seed and their index in the stream, so a
  /// run resumed under another global batch goes on with the next unused sample.
  void save(checkpoint_writer& w) const;
  /// Restores a state saved by save() under any data-parallel plan (DDP or an FSDP
  /// strategy) and rank count of the same model, optimizer, element type and seed (else
  /// argument_error naming both values), so that the next step() is the one after the saved step.
  void load(checkpoint_reader& r);
  [[nodiscard]] long steps_done() const noexcept { return step_; }
  [[nodiscard]] const train_options& options() const noexcept { return o_; }
  [[nodiscard]] const mesh& plan_mesh() const noexcept { return mesh_; }
  /// This rank's parameters and gradient: all of them (DDP) or its shards (FSDP, one unit
  /// after another as fsdp<T>::shards() lays them out, padding included).
  [[nodiscard]] std::span<const T> params() const noexcept;
  [[nodiscard]] std::span<const T> grads() noexcept;
  [[nodiscard]] const param_layout& layout() const noexcept { return model_.layout(); }
  /// The engine of the plan's strategy: DDP's for no_shard, else FSDP's (the other null).
  [[nodiscard]] const ddp<T>* ddp_engine() const noexcept { return ddp_ ? &*ddp_ : nullptr; }
  [[nodiscard]] const fsdp<T>* fsdp_engine() const noexcept { return fsdp_ ? &*fsdp_ : nullptr; }
  /// Of the last step's data-parallel communication, the fraction hidden behind compute.
  [[nodiscard]] double hidden_fraction() const noexcept;
  [[nodiscard]] const pipeline_timing& last_pipeline_timing() const noexcept { return pipe_; }
  /// This worker's pipeline stage and its blocks [first, end).
  [[nodiscard]] const model_part& part() const noexcept { return model_.layout().part; }
  /// "gradients in the symmetric heap" and the like, for the start-up line.
  [[nodiscard]] std::string memory_placement() const;
  [[nodiscard]] std::size_t tokens_per_step() const noexcept {
    return std::size_t(o_.plan.dp) * o_.batch * o_.model.context;
  }

private:
  /// One micro-batch (inputs_, targets_) forward into `slot`, from `input` after the first
  /// stage, over the plan's parameters.
  T forward(int slot, std::span<const T> input, int batch);
  void backward(int slot, T loss_scale, std::span<const T> dout, std::span<T> dinput, bool sync);
  /// Micro-batch k's samples (of this data-parallel rank's step from sample `first`).
  void load_micro_batch(std::uint64_t first, int k, int micro);
  /// inputs_/targets_ (`batch` samples) forward through every stage in turn, without
  /// backward (evaluation, sampling; `k` names it in errors): the loss on the last stage.
  T forward_through_stages(int batch, int k);
  /// Calls f(dataset, piece, entry, unit, array) for every tensor of the whole model in
  /// every state array (parameters, optimizer moments), in the same order on every rank:
  /// the dataset in the whole model's shape, this part's box of it (`counted`: this copy
  /// writes), and this part's entry and unit, or null and none_held for another stage's.
  template <typename Self, typename F>
  static void each_tensor(Self& self, F&& f);
  /// Unit u of a state array, whole: a view of it (DDP) or gathered into `whole` (FSDP).
  std::span<const T> unit_values(std::span<const T> data, std::size_t u,
                                 std::vector<T>& whole) const;
  static constexpr std::size_t none_held = ~std::size_t{0};
  train_options o_;
  std::shared_ptr<const corpus> data_;
  mesh mesh_, dp_mesh_, pp_mesh_;
  gpt<T> model_;
  std::optional<ddp<T>> ddp_;   // no_shard
  std::optional<fsdp<T>> fsdp_; // the sharded strategies
  std::variant<adam<T>, sgd<T>> optimizer_;
  long step_ = 0;
  std::uint64_t samples_ = 0; ///< of the training stream, consumed by all ranks' steps so far
  std::vector<int> inputs_, targets_;
  // Pipeline stages: what crosses a boundary, per activation slot (1F1B keeps up to
  // pp - stage micro-batches in flight), and the sends still in flight.
  std::vector<tracked_vector<T>> received_, dinput_;
  tracked_vector<T> dout_ = tracked<T>(buffer_kind::activations);
  std::vector<MPI_Request> output_sent_, dinput_sent_;
  pipeline_timing pipe_;
};

} // namespace crown::parallel
