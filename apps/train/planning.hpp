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

/// Measurements on `workers`, the ranks `where` describes (collective; every rank gets the
/// same result: the slowest rank's median of each timing), every rank at once, as in
/// training; `summary` gets a line per figure. calibrate_layers(): each kind of layer's
/// forward, backward and optimizer-step time at `micro_batch` samples, into
/// planner_model(). calibrate_cluster(): the job's hosts and ranks per host (job_hosts()),
/// the GEMM rate at the model's largest shape, an all-reduce within a host and across hosts
/// fitted to latency and bandwidth, and the memory per rank. T is float or double.
template <typename T>
[[nodiscard]] crown::plan::model
calibrate_layers(const crown::mesh& workers, const crown::parallel::gpt_config& config,
                 const std::string& optimizer, int micro_batch, std::string& summary);
template <typename T>
[[nodiscard]] crown::plan::cluster
calibrate_cluster(const crown::mesh& workers, const crown::topology& where,
                  const crown::parallel::gpt_config& config, int micro_batch, std::string& summary);

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
                 const crown::parallel::gpt_config& config, int element_bytes,
                 const std::string& optimizer);

/// The cost model's estimate of `p` (its stages as the trainer splits them), a plan the
/// trainer accepts (check_options()).
[[nodiscard]] crown::plan::estimate predict(const crown::plan::model& m,
                                            const crown::plan::cluster& c,
                                            const crown::plan::training& t,
                                            const crown::parallel::plan& p, int blocks);

/// "1.23 GiB", "17.50 MiB", "512 bytes"
[[nodiscard]] std::string size_text(double bytes);
/// "1.23 GiB (model state 0.50 GiB, gathered 0 bytes, activations 0.73 GiB)"
[[nodiscard]] std::string memory_text(const crown::plan::memory_use& m);

} // namespace train
