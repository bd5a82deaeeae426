// The planner's cost model (include/crown/plan/cost.hpp); every formula is written out in
// docs/parallel.md, "Planning: crown-plan".
#include <algorithm>
#include <crown/error.hpp>
#include <crown/plan/cost.hpp>

namespace crown::plan {

namespace {

/// Ring all-reduce over n ranks: 2(n-1) steps of bytes/n each.
double all_reduce(double n, double bytes, const link& l) {
  return n > 1 ? 2 * (n - 1) * (l.latency + bytes / (n * l.bandwidth)) : 0;
}
/// Ring all-gather or reduce-scatter over n ranks of a `bytes` whole.
double gather(double n, double bytes, const link& l) {
  return n > 1 ? (n - 1) * (l.latency + bytes / (n * l.bandwidth)) : 0;
}

/// Ranks [0, group) with stride `stride` lie on one host for every group start.
bool within_host(int span, int devices_per_host) {
  return span <= devices_per_host && devices_per_host % span == 0;
}

} // namespace

std::string to_string(const plan_choice& p, bool with_micro) {
  const plan_kind& k = p.kind;
  std::string s = "dp=" + std::to_string(k.dp);
  if (k.tp != 1) s += ",tp=" + std::to_string(k.tp);
  if (k.pp != 1) s += ",pp=" + std::to_string(k.pp);
  constexpr const char* names[] = {"no", "full", "grad_op", "hybrid"};
  if (k.shard != sharding::no_shard) s += std::string(",fsdp=") + names[static_cast<int>(k.shard)];
  if (with_micro && k.micro != 1) s += ",micro=" + std::to_string(k.micro);
  for (std::size_t i = 0; i < p.stages.size(); ++i)
    s += (i == 0 ? ",stages=" : ":") + std::to_string(p.stages[i]);
  return s;
}

std::string kind_problem(const model& m, const cluster& c, const training& t, const plan_kind& k) {
  const int layers = static_cast<int>(m.layers.size());
  const int d = c.devices_per_host;
  if (k.dp * k.tp * k.pp != c.devices())
    return "uses " + std::to_string(k.dp * k.tp * k.pp) + " devices, the cluster has " +
           std::to_string(c.devices());
  if (k.pp > layers)
    return "pp=" + std::to_string(k.pp) + " exceeds the model's " + std::to_string(layers) +
           " layers";
  for (auto [n, what] :
       {std::pair{m.heads, " attention heads"}, std::pair{m.hidden, " hidden size"},
        std::pair{m.vocabulary, " vocabulary"}})
    if (n > 0 && n % k.tp != 0)
      return "tp=" + std::to_string(k.tp) + " does not divide the " + std::to_string(n) + what;
  if (k.micro > 16383) // crown-train's pipeline tags its messages 2k and 2k + 1
    return "micro=" + std::to_string(k.micro) + " exceeds crown-train's 16383 micro-batches";
  if (t.global_batch % k.dp != 0)
    return "dp=" + std::to_string(k.dp) + " does not divide the global batch " +
           std::to_string(t.global_batch);
  if (t.global_batch % (k.dp * k.micro) != 0)
    return "micro=" + std::to_string(k.micro) +
           " does not divide the batch per data-parallel rank " +
           std::to_string(t.global_batch / k.dp);
  if (k.shard != sharding::no_shard && k.dp == 1) return "sharding needs dp > 1";
  if (k.shard == sharding::hybrid_shard &&
      !(within_host(k.tp, d) && d / k.tp > 1 && k.dp * k.tp > d && k.dp % (d / k.tp) == 0))
    return "HYBRID_SHARD needs dp to span whole hosts with more than one shard per host "
           "(dp=" +
           std::to_string(k.dp) + ", tp=" + std::to_string(k.tp) + ", " + std::to_string(d) +
           " devices per host)";
  return {};
}

cost_model::cost_model(const model& m, const cluster& c, const training& t, const plan_kind& k)
    : k_(k), budget_(t.memory_budget_bytes), recompute_(t.recompute) {
  const double tp = k.tp, dp = k.dp;
  const int per_host = c.devices_per_host;
  samples_per_step_ = t.global_batch;
  micro_samples_ = static_cast<double>(t.global_batch) / (k.dp * k.micro);
  const double b = micro_samples_, rate = c.peak_flops * c.achievable_fraction;
  workspace_ = m.workspace_bytes * b;
  // Placement: tp fastest, then dp, pp outermost (crown::parallel::make_mesh's layout).
  const link& tp_link = within_host(k.tp, per_host) ? c.intra_host : c.inter_host;
  const link& dp_link = within_host(k.tp * k.dp, per_host) ? c.intra_host : c.inter_host;
  const link& pp_link = c.devices() <= per_host ? c.intra_host : c.inter_host;
  boundary_latency_ = pp_link.latency;
  boundary_bandwidth_ = pp_link.bandwidth;

  // Who shards with whom: FULL_SHARD and SHARD_GRAD_OP over dp; HYBRID_SHARD within a
  // host and all-reduces the shards across hosts.
  double shard_ranks = 1;
  link shard_link = dp_link;
  sync_ranks_ = 1;
  sync_divisor_ = 1;
  if (k.shard == sharding::no_shard) {
    sync_ranks_ = dp;
    sync_latency_ = dp_link.latency;
    sync_bandwidth_ = dp_link.bandwidth;
  } else if (k.shard == sharding::hybrid_shard) {
    shard_ranks = per_host / k.tp;
    shard_link = c.intra_host;
    sync_ranks_ = dp / shard_ranks;
    sync_divisor_ = shard_ranks;
    sync_latency_ = c.inter_host.latency;
    sync_bandwidth_ = c.inter_host.bandwidth;
  } else {
    shard_ranks = dp;
  }
  // The optimizer steps this device's parameters: its tp slice, its shard under FSDP.
  const double optimizer_share = tp * (k.shard == sharding::no_shard ? 1 : shard_ranks);

  // Model state per parameter: compute copy, gradient, optimizer (a master copy where the
  // parameters are narrower than the optimizer's precision, and Adam's two moments).
  const double pb = t.parameter_bytes, gb = t.gradient_bytes;
  const double ob = (t.parameter_bytes < t.optimizer_bytes ? t.optimizer_bytes : 0) +
                    (t.opt == optimizer::adam ? 2.0 * t.optimizer_bytes : 0.0);
  switch (k.shard) {
  case sharding::no_shard:
    state_bytes_whole_ = pb + gb + ob;
    break;
  case sharding::full_shard:
  case sharding::hybrid_shard:
    state_bytes_sharded_ = (pb + gb + ob) / shard_ranks;
    gathered_bytes_ = 2 * (pb + gb);
    break;
  case sharding::shard_grad_op:
    state_bytes_whole_ = pb;
    state_bytes_sharded_ = (gb + ob) / shard_ranks;
    gathered_bytes_ = 2 * gb;
    break;
  }

  const double passes = t.recompute ? 3 : 2; // forward, backward, recomputed forward
  for (const layer& l : m.layers) {
    per_layer x;
    const double fwd = l.forward_seconds > 0
                           ? (l.forward_fixed_seconds + l.forward_seconds * b) / tp
                           : l.forward_flops * b / (tp * rate);
    const double bwd = l.backward_seconds > 0
                           ? (l.backward_fixed_seconds + l.backward_seconds * b) / tp
                           : l.backward_flops * b / (tp * rate);
    x.compute = fwd * (t.recompute ? 2 : 1) + bwd;
    x.backward = bwd;
    const double tp_comm = passes * all_reduce(tp, l.tp_allreduce_bytes * b, tp_link);
    x.params = l.parameters / tp;
    x.grad_bytes = x.params * gb;
    // FSDP per micro-batch: FULL_SHARD and HYBRID_SHARD gather the parameters twice (forward,
    // backward), SHARD_GRAD_OP once; every strategy reduce-scatters the gradient.
    auto fsdp_traffic = [&](const link& over) {
      if (k.shard == sharding::no_shard) return 0.0;
      return (k.shard == sharding::shard_grad_op ? 1 : 2) *
                 gather(shard_ranks, x.params * pb, over) +
             gather(shard_ranks, x.grad_bytes, over);
    };
    const double fsdp = fsdp_traffic(shard_link);
    // It runs beside compute, costing it what the cluster says such traffic does.
    const double exposed = c.beside_compute.bandwidth > 0 ? fsdp_traffic(c.beside_compute) : 0;
    x.seconds = std::max(x.compute + tp_comm + exposed, fsdp);
    x.full = (l.activation_bytes / tp + l.replicated_activation_bytes) * b;
    x.stored = t.recompute ? l.input_bytes * b : x.full;
    x.input_bytes = l.input_bytes * b;
    x.optimizer = l.optimizer_seconds / optimizer_share;
    layer_.push_back(x);
  }
}

double cost_model::boundary_seconds(int j) const {
  if (k_.pp == 1 || j <= 0 || j >= layers()) return 0;
  return 2 * (boundary_latency_ + layer_[j].input_bytes / boundary_bandwidth_);
}

double cost_model::sync_seconds(double grad_bytes, double backward_seconds) const {
  const link l{sync_bandwidth_, sync_latency_};
  return std::max(0.0, all_reduce(sync_ranks_, grad_bytes / sync_divisor_, l) - backward_seconds);
}

void cost_model::layer_maxima::add(const cost_model& cm, int l) {
  params = std::max(params, cm.layer_[l].params);
  full = std::max(full, cm.layer_[l].full);
  input = std::max(input, cm.layer_[l].input_bytes);
}

memory_use cost_model::stage_memory(int s, double params, double stored_activations,
                                    const layer_maxima& max) const {
  const double in_flight = std::min(k_.pp - s, k_.micro);
  // Under recomputation the stored inputs include the stage's; one layer is recomputed.
  double activations =
      in_flight * stored_activations + (recompute_ ? max.full : in_flight * max.input) + workspace_;
  if (k_.pp > 1) activations += (2 * in_flight + 1) * max.input;
  return {params * (state_bytes_whole_ + state_bytes_sharded_), max.params * gathered_bytes_,
          activations};
}

estimate cost_model::evaluate(const std::vector<int>& stages) const {
  const int n = layers(), p = k_.pp;
  std::vector<int> bounds{0};
  bounds.insert(bounds.end(), stages.begin(), stages.end());
  bounds.push_back(n);
  if (static_cast<int>(bounds.size()) != p + 1)
    throw argument_error("crown::plan::evaluate",
                         std::to_string(stages.size()) +
                             " stage boundaries for pp=" + std::to_string(p));
  for (int s = 0; s < p; ++s)
    if (bounds[s] >= bounds[s + 1])
      throw argument_error("crown::plan::evaluate", "stage " + std::to_string(s) + " is empty");
  estimate e;
  e.plan = {k_, stages};
  e.fits = true;
  double sum = 0, worst = -1, sum_compute = 0, worst_compute = 0;
  for (int s = 0; s < p; ++s) {
    double seconds = 0, compute = 0, grad = 0, backward = 0, params = 0, stored = 0, optimizer = 0;
    layer_maxima max;
    for (int l = bounds[s]; l < bounds[s + 1]; ++l) {
      const per_layer& x = layer_[l];
      seconds += x.seconds;
      compute += x.compute;
      grad += x.grad_bytes;
      backward += x.backward;
      params += x.params;
      stored += x.stored;
      optimizer += x.optimizer;
      max.add(*this, l);
    }
    seconds += boundary_seconds(bounds[s + 1]);
    const double bottleneck = (k_.micro - 1) * seconds + sync_seconds(grad, backward) + optimizer;
    const memory_use mem = stage_memory(s, params, stored, max);
    if (mem.total() > budget_) e.fits = false;
    if (mem.total() > e.memory.total()) e.memory = mem;
    e.stage_seconds.push_back(seconds);
    sum += seconds;
    sum_compute += compute;
    if (bottleneck > worst) {
      worst = bottleneck;
      worst_compute = (k_.micro - 1) * compute;
    }
  }
  e.step_seconds = sum + worst;
  e.samples_per_second = samples_per_step_ / e.step_seconds;
  double busy = 0;
  for (double s : e.stage_seconds) busy += k_.micro * s;
  e.bubble_fraction = 1 - busy / (p * e.step_seconds);
  e.communication_share = std::max(0.0, 1 - (sum_compute + worst_compute) / e.step_seconds);
  return e;
}

} // namespace crown::plan
