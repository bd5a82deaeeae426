// include/crown/plan/inputs.hpp — what the planner plans from: a model (per layer, or an
// analytic GPT), a cluster and a training setup, read from JSON files (docs/parallel.md).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace crown::plan {

/// One layer, per sample. Activations split across tensor-parallel ranks unless replicated.
struct layer {
  std::string name;
  double parameters = 0;                  ///< parameter count
  double activation_bytes = 0;            ///< kept for backward, split by tp
  double replicated_activation_bytes = 0; ///< kept for backward, not split by tp
  double input_bytes = 0; ///< its input: kept under recomputation, sent across a stage boundary
  double forward_flops = 0;
  double backward_flops = 0;
  double forward_seconds = 0; ///< measured on one device at tp=1 (0: use FLOPs)
  double backward_seconds = 0;
  /// With measured times: per micro-batch on top of the per-sample ones (small kernels run
  /// below their rate: a micro-batch of b samples takes fixed + b x per-sample).
  double forward_fixed_seconds = 0, backward_fixed_seconds = 0;
  double tp_allreduce_bytes = 0; ///< all-reduced across tp in one forward (as much in backward)
  double optimizer_seconds = 0;  ///< one optimizer step over its parameters on one device (0: none)
};

/// The model: its layers in order. `heads`, `hidden` and `vocabulary` (0: none) must be
/// divisible by tp, as crown-train requires; `tokens_per_sample` (0: unknown) turns
/// samples/s into tokens/s; `workspace_bytes` per sample, once per device: scratch that
/// forward and backward share across layers.
struct model {
  std::vector<layer> layers;
  int heads = 0, hidden = 0, vocabulary = 0;
  double tokens_per_sample = 0;
  double workspace_bytes = 0;
  std::string optimizer; ///< the optimizer its layers' optimizer_seconds were measured with
};

/// A GPT-style transformer, described by its shape (Megatron-LM's layout: embeddings in the
/// first block's layer, the final norm and logits in the last one's, word embeddings tied).
struct gpt_shape {
  int layers = 0, hidden = 0, heads = 0, sequence = 0, vocabulary = 0;
};
/// Per-layer figures from the standard formulas (docs/parallel.md), activations at
/// `activation_dtype_bytes` per element.
[[nodiscard]] model gpt_model(const gpt_shape& g, double activation_dtype_bytes);

/// A link between two devices: bandwidth in bytes/s per device, latency in seconds.
struct link {
  double bandwidth = 0;
  double latency = 0;
};

struct cluster {
  int hosts = 1;
  int devices_per_host = 1;
  double memory_bytes = 0; ///< per device
  std::string precision;   ///< of the peak below, e.g. "bf16"
  double peak_flops = 0;   ///< per device at `precision`
  double achievable_fraction = 1;
  link intra_host, inter_host;
  /// What a collective run beside compute (FSDP's gathers and reduce-scatters on their own
  /// thread) costs the compute, as a link: where a spare core or a copy engine runs it, nothing
  /// (bandwidth 0, the default); on a machine whose cores all compute, its latency and copies.
  link beside_compute;
  [[nodiscard]] int devices() const noexcept { return hosts * devices_per_host; } ///< <= 2^20
};

enum class optimizer { adam, sgd };

struct training {
  int global_batch = 1;    ///< samples per step
  int parameter_bytes = 2; ///< per parameter (compute copy)
  int gradient_bytes = 2;
  int optimizer_bytes = 4;         ///< per optimizer state element and master copy
  std::string parameter_precision; ///< its name, matched against the cluster's
  optimizer opt = optimizer::adam;
  bool recompute = false;         ///< activation recomputation (whole layers)
  double memory_budget_bytes = 0; ///< per device
};

/// Bytes per element of a precision name: fp64/float64 8, fp32/float32 4, bf16/fp16/float16 2,
/// fp8 1.
/// Throws argument_error naming the value otherwise.
[[nodiscard]] int precision_bytes(std::string_view name, std::string_view where);

/// Readers: `what` names the source in errors (the file name). Every field is checked
/// (type, range), unknown keys are errors; argument_error names the file, field and value.
[[nodiscard]] model parse_model(std::string_view json, std::string_view what);
[[nodiscard]] cluster parse_cluster(std::string_view json, std::string_view what);
[[nodiscard]] training parse_training(std::string_view json, std::string_view what);
/// Writers: the per-layer form of parse_model() and the form of parse_cluster(), which read
/// them back equal (to rounding where the file's units differ: GB/s, us, TFLOP/s, GiB).
[[nodiscard]] std::string to_json(const model& m);
[[nodiscard]] std::string to_json(const cluster& c);
/// Reads a whole file (argument_error naming it if it cannot).
[[nodiscard]] std::string read_file(const std::string& path);

/// Checks the cluster and training files together: the precisions they name agree and the
/// budget fits the devices' memory; argument_error naming both files and fields otherwise.
void check_consistent(const cluster& c, std::string_view cluster_what, const training& t,
                      std::string_view training_what);

} // namespace crown::plan
