// include/crown/plan/cost.hpp — the planner's closed-form cost model: memory per device and
// step time of a plan under 1F1B (formulas in docs/parallel.md, "Planning: crown-plan").
#pragma once
#include <crown/plan/inputs.hpp>
#include <string>
#include <vector>

namespace crown::plan {

/// FSDP's sharding strategy, named as PyTorch and crown-train name them.
enum class sharding { no_shard, full_shard, shard_grad_op, hybrid_shard };

/// What the search enumerates: degrees, sharding, micro-batches (no stage boundaries).
struct plan_kind {
  int dp = 1, tp = 1, pp = 1;
  sharding shard = sharding::no_shard;
  int micro = 1; ///< micro-batches per step and data-parallel rank
  friend bool operator==(const plan_kind&, const plan_kind&) = default;
};

/// A whole plan: its kind and the first layer of stages 1..pp-1 (ascending).
struct plan_choice {
  plan_kind kind;
  std::vector<int> stages;
};

/// "dp=2,tp=2,pp=2,fsdp=full,micro=4,stages=3:6", defaults left out: the syntax of
/// crown::parallel::parse_plan (crown-train --plan). `with_micro` false leaves micro out.
[[nodiscard]] std::string to_string(const plan_choice& p, bool with_micro = true);

/// Per-device memory of the fullest stage, in bytes, by kind.
struct memory_use {
  double model_state = 0; ///< parameters, gradients, optimizer state (this device's share)
  double gathered = 0;    ///< FSDP: at most two layers gathered (with their unsharded gradients)
  double activations = 0; ///< micro-batches in flight, and one layer's recomputation
  [[nodiscard]] double total() const noexcept { return model_state + gathered + activations; }
};

/// The cost model's figures for one plan. The step's time includes, after the last
/// micro-batch's backward, the exposed gradient synchronisation and the optimizer step of
/// the stage that finishes last.
struct estimate {
  plan_choice plan;
  double step_seconds = 0;
  double samples_per_second = 0;
  memory_use memory;                 ///< of the stage that needs the most
  double bubble_fraction = 0;        ///< average idle share of a device over the step
  double communication_share = 0;    ///< exposed communication on the critical path / step
  std::vector<double> stage_seconds; ///< one micro-batch through each stage
  bool fits = false;                 ///< memory within the budget on every stage
};

/// Why a plan kind cannot run, or "" if it can.
[[nodiscard]] std::string kind_problem(const model& m, const cluster& c, const training& t,
                                       const plan_kind& k);

/// Per-layer costs of one plan kind, and the stage formulas built on them. The search and
/// evaluate() share these, so "exact" compares searches under one model.
class cost_model {
public:
  cost_model(const model& m, const cluster& c, const training& t, const plan_kind& k);

  [[nodiscard]] int layers() const noexcept { return static_cast<int>(layer_.size()); }
  /// Seconds of one micro-batch of layer l on its stage (compute, TP all-reduces, FSDP's
  /// per-micro-batch traffic overlapped with them).
  [[nodiscard]] double layer_seconds(int l) const { return layer_[l].seconds; }
  [[nodiscard]] double layer_compute_seconds(int l) const { return layer_[l].compute; }
  /// Boundary transfers of a stage that ends before layer j (activation out, gradient in).
  [[nodiscard]] double boundary_seconds(int j) const;
  /// Per-step exposed gradient synchronisation of a stage of layers [i, j) given its sums.
  [[nodiscard]] double sync_seconds(double grad_bytes, double backward_seconds) const;
  /// The largest of a stage's layers: parameters, full activations, input (one micro-batch).
  struct layer_maxima {
    double params = 0, full = 0, input = 0;
    void add(const cost_model& cm, int l);
  };
  /// Memory of stage `s` holding layers [i, j) given its sums and maxima: besides each
  /// layer's stored activations, every micro-batch in flight keeps the stage's input, a
  /// pipeline stage (pp > 1) has a receive and a gradient buffer per micro-batch in flight
  /// and one for the gradient coming back, and the workspace is there once. The stage's
  /// input is bounded by its largest layer input (equal for a transformer's blocks), which
  /// keeps the memory of a stage growing as it takes more layers.
  [[nodiscard]] memory_use stage_memory(int s, double params, double stored_activations,
                                        const layer_maxima& max) const;
  [[nodiscard]] double layer_parameters(int l) const { return layer_[l].params; }
  [[nodiscard]] double layer_grad_bytes(int l) const { return layer_[l].grad_bytes; }
  [[nodiscard]] double layer_backward_seconds(int l) const { return layer_[l].backward; }
  [[nodiscard]] double layer_stored_activations(int l) const { return layer_[l].stored; }
  [[nodiscard]] double layer_full_activations(int l) const { return layer_[l].full; }
  [[nodiscard]] double layer_input_bytes(int l) const { return layer_[l].input_bytes; }
  /// One optimizer step over this device's share of layer l's parameters.
  [[nodiscard]] double layer_optimizer_seconds(int l) const { return layer_[l].optimizer; }
  [[nodiscard]] const plan_kind& kind() const noexcept { return k_; }
  [[nodiscard]] double budget() const noexcept { return budget_; }

  /// The model's figures for a whole plan, computed stage by stage from the layers
  /// (no prefix sums: the reference the search is checked against).
  [[nodiscard]] estimate evaluate(const std::vector<int>& stages) const;

private:
  struct per_layer {
    double seconds = 0, compute = 0, backward = 0, params = 0, grad_bytes = 0, stored = 0, full = 0,
           input_bytes = 0, optimizer = 0;
  };
  plan_kind k_;
  std::vector<per_layer> layer_;
  double samples_per_step_ = 0;
  double micro_samples_ = 0;
  double state_bytes_sharded_ = 0, state_bytes_whole_ = 0, gathered_bytes_ = 0;
  double boundary_latency_ = 0, boundary_bandwidth_ = 1;
  double sync_latency_ = 0, sync_bandwidth_ = 1, sync_ranks_ = 1, sync_divisor_ = 1;
  double budget_ = 0, workspace_ = 0;
  bool recompute_ = false;
};

} // namespace crown::plan
