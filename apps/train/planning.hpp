// apps/train/planning.hpp — crown-train's link to the planner (crown-plan's library): its
// GPT as the planner's model, calibration of that model and of the job's links on the ranks
// that will train, predictions of a plan's step time and memory, and --plan auto's choice.
#pragma once
#include <crown/mesh.hpp>
#include <crown/parallel/gpt.hpp>
#include <crown/parallel/plan.hpp>
#include <crown/plan/search.hpp>
#include <crown/topology.hpp>
#include <string>
#include <utility>
#include <vector>

namespace train {

/// crown-train's GPT as the planner sees it: one layer per block (the embeddings in the
/// first, the final norm and output layer in the last, so that stage boundaries are block
/// indices as in --plan's stages=), with the parameters, saved activations and workspace
/// gpt<T> allocates per sample at `element_bytes` (4 float, 8 double) and its kernels' FLOPs.
/// Layer times are not measured here: calibrate() adds them.
[[nodiscard]] crown::plan::model planner_model(const crown::parallel::gpt_config& c,
                                               int element_bytes);

/// The planner's training description of a run: `global_batch` samples per step, the
/// element type's bytes for parameters, gradients and optimizer state, the optimizer, no
/// recomputation, `budget` bytes per rank.
[[nodiscard]] crown::plan::training planner_training(int global_batch, int element_bytes,
                                                     const std::string& optimizer, double budget);

/// A crown-train plan as the planner's choice (equal stages resolved as the trainer splits
/// the blocks), and back.
[[nodiscard]] crown::plan::plan_choice to_choice(const crown::parallel::plan& p, int blocks);
[[nodiscard]] crown::parallel::plan to_plan(const crown::plan::plan_choice& c);

/// "fp32" or "fp64": the precision names the planner's files use for float and double.
[[nodiscard]] std::string precision_of(int element_bytes);

/// What calibrate() measured: the job's cluster (its hosts and ranks per host, the GEMM rate
/// at the model's shapes, each level's all-reduce fitted to latency and bandwidth) and the
/// model with each layer's forward, backward and optimizer times.
struct calibration {
  crown::plan::cluster cluster;
  crown::plan::model model;
  double gemm_flops = 0; ///< per rank, all ranks multiplying at once
  std::string summary;   ///< what was measured, for a person
};

/// Measures on `workers`, the ranks `where` describes (collective; every rank gets the same
/// result: the slowest rank's time of each measurement). Layers run at `micro_batch` samples
/// on every rank at once, as in training. Ranks must be placed host by host (CROWN_FAKE_HOSTS
/// places them so), as many on every host; argument_error otherwise. T is float or double.
template <typename T>
[[nodiscard]] calibration calibrate(const crown::mesh& workers, const crown::topology& where,
                                    const crown::parallel::gpt_config& config,
                                    const std::string& optimizer, int micro_batch);

/// The hosts of `workers` (the ranks `where` describes) and the ranks on each; argument_error
/// unless ranks are placed host by host, as many on each (as the planner's cluster assumes).
[[nodiscard]] std::pair<int, int> job_hosts(const crown::mesh& workers,
                                            const crown::topology& where);

/// Checks that a cluster file describes this job (`hosts` x `per_host` ranks) and a model
/// file this model at this precision; argument_error naming the file, both values and the
/// way out (calibrate again) otherwise.
void check_cluster(const crown::plan::cluster& c, const std::string& what, int hosts, int per_host,
                   int element_bytes);
void check_model(const crown::plan::model& m, const std::string& what,
                 const crown::parallel::gpt_config& config, int element_bytes);

/// The cost model's estimate of `p` (its stages as the trainer splits them).
[[nodiscard]] crown::plan::estimate predict(const crown::plan::model& m,
                                            const crown::plan::cluster& c,
                                            const crown::plan::training& t,
                                            const crown::parallel::plan& p, int blocks);

/// "1.23 GiB", "17.50 MiB", "512 bytes"
[[nodiscard]] std::string size_text(double bytes);

} // namespace train
