// include/crown/parallel/plan.hpp — how a training job splits its workers: data, tensor and
// pipeline parallel degrees, FSDP's sharding strategy, micro-batches and stage boundaries.
#pragma once
#include <crown/mesh.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace crown::parallel {

/// PyTorch FSDP's ShardingStrategy; no_shard is DDP.
enum class fsdp_strategy { no_shard, full_shard, shard_grad_op, hybrid_shard };
[[nodiscard]] std::string_view to_string(fsdp_strategy s);

/// A parallel plan. The mesh it makes has dimensions {pp, dp, tp}, tp varying fastest
/// (ranks of a tensor-parallel group adjacent, as Megatron lays them out), pp outermost.
struct plan {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  fsdp_strategy fsdp = fsdp_strategy::no_shard;
  int microbatches = 1;    ///< per step and data-parallel rank; the local batch splits evenly
  std::vector<int> stages; ///< first block of stages 1..pp-1 (empty: equal blocks per stage)

  [[nodiscard]] int workers() const noexcept { return dp * tp * pp; }
  /// "dp=2,tp=2,pp=2,fsdp=full,micro=4,stages=3:6": the form parse() reads, defaults left out
  /// (a plan of all defaults prints "dp=1").
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const plan&, const plan&) = default;
};

/// Reads "key=value,..." with keys dp, tp, pp (positive integers), fsdp (no|full|grad_op|
/// hybrid, or PyTorch's NO_SHARD, FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD), micro (positive)
/// and stages (ascending block indices separated by ':'). Throws argument_error naming the
/// text, the field and the rule on anything else (unknown or repeated keys included).
[[nodiscard]] plan parse_plan(std::string_view text);

/// What a plan is checked against before any work starts.
struct plan_limits {
  int workers = 1;    ///< ranks that train
  int batch = 1;      ///< samples per step and data-parallel rank
  int blocks = 1;     ///< transformer blocks (pipeline stages split them)
  int heads = 1;      ///< attention heads (tensor parallelism splits them)
  int channels = 1;   ///< hidden size
  int vocabulary = 1; ///< embedding rows
};

/// Throws argument_error naming the numbers and the rule when `p` cannot run: its workers
/// differ from `l.workers`, micro-batches do not divide the batch, stage boundaries are out
/// of order or range, pp exceeds the blocks, or tp does not divide heads, channels or
/// vocabulary.
void validate(const plan& p, const plan_limits& l);

/// The plan's mesh {pp, dp, tp} over `workers` (whose size must be p.workers()).
[[nodiscard]] mesh make_mesh(const plan& p, const mesh& workers);

} // namespace crown::parallel
