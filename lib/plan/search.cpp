// The planner's search (include/crown/plan/search.hpp). For one plan kind the step time is
//   sum_s t_s + max_s w_s,   w_s = (m-1) t_s + e_s   (e_s: exposed gradient synchronisation),
// not a pure min-max, so the bottleneck bound W is enumerated over every value a stage can
// take, and for each W a dynamic programme finds the least sum of stage times with every
// w_s <= W and every stage within memory. The least sum + W over all W is the optimum; W
// ascends from the smallest feasible one and stops once the unconstrained least sum + W
// cannot beat the best found.
#include <algorithm>
#include <cmath>
#include <crown/plan/search.hpp>
#include <limits>
#include <queue>

namespace crown::plan {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

std::vector<int> divisors(int n) {
  std::vector<int> d, large;
  for (int i = 1; i <= n / i; ++i)
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i) large.push_back(n / i);
    }
  d.insert(d.end(), large.rbegin(), large.rend());
  return d;
}

/// Prefix sums of one kind's layers, and the stage formulas on them.
class stage_table {
public:
  explicit stage_table(const cost_model& cm) : cm_(cm), n_(cm.layers()) {
    sec_.assign(n_ + 1, 0);
    grad_ = back_ = par_ = stored_ = optimizer_ = sec_;
    for (int l = 0; l < n_; ++l) {
      sec_[l + 1] = sec_[l] + cm.layer_seconds(l);
      grad_[l + 1] = grad_[l] + cm.layer_grad_bytes(l);
      back_[l + 1] = back_[l] + cm.layer_backward_seconds(l);
      par_[l + 1] = par_[l] + cm.layer_parameters(l);
      stored_[l + 1] = stored_[l] + cm.layer_stored_activations(l);
      optimizer_[l + 1] = optimizer_[l] + cm.layer_optimizer_seconds(l);
    }
  }
  [[nodiscard]] double time(int i, int j) const {
    return sec_[j] - sec_[i] + cm_.boundary_seconds(j);
  }
  [[nodiscard]] double bottleneck(int i, int j, double t) const {
    // The optimizer's difference first: never below (m-1)t, which the search prunes on.
    return (cm_.kind().micro - 1) * t + cm_.sync_seconds(grad_[j] - grad_[i], back_[j] - back_[i]) +
           (optimizer_[j] - optimizer_[i]);
  }
  [[nodiscard]] double memory(int s, int i, int j, const cost_model::layer_maxima& max) const {
    return cm_.stage_memory(s, par_[j] - par_[i], stored_[j] - stored_[i], max).total();
  }
  [[nodiscard]] int layers() const noexcept { return n_; }
  [[nodiscard]] const cost_model& model() const noexcept { return cm_; }

private:
  const cost_model& cm_;
  int n_;
  std::vector<double> sec_, grad_, back_, par_, stored_, optimizer_;
};

struct split {
  double sum = inf;        ///< of stage times
  std::vector<int> stages; ///< first layer of stages 1..p-1
};

/// The least sum of stage times over splits into `p` contiguous stages with every stage's
/// bottleneck term <= W and memory within the budget.
class splitter {
public:
  explicit splitter(const stage_table& t)
      : t_(t), p_(t.model().kind().pp), n_(t.layers()), f_((p_ + 1) * (n_ + 1)),
        arg_((p_ + 1) * (n_ + 1)) {}

  split best(double W) {
    const int m = t_.model().kind().micro;
    const double budget = t_.model().budget();
    std::fill(f_.begin(), f_.end(), inf);
    f_[0] = 0;
    for (int k = 1; k <= p_; ++k)
      for (int j = k; j <= n_ - (p_ - k); ++j) {
        double best = inf;
        cost_model::layer_maxima max;
        int at = -1;
        for (int i = j - 1; i >= k - 1; --i) { // the stage [i, j) grows: time and memory too
          max.add(t_.model(), i);
          const double time = t_.time(i, j);
          if (m > 1 && (m - 1) * time > W) break;
          if (t_.memory(k - 1, i, j, max) > budget) break;
          const double prev = f_[(k - 1) * (n_ + 1) + i];
          if (prev == inf || t_.bottleneck(i, j, time) > W) continue;
          if (prev + time < best) {
            best = prev + time;
            at = i;
          }
        }
        f_[k * (n_ + 1) + j] = best;
        arg_[k * (n_ + 1) + j] = at;
      }
    split s;
    s.sum = f_[p_ * (n_ + 1) + n_];
    if (s.sum == inf) return s;
    s.stages.resize(p_ - 1);
    for (int k = p_, j = n_; k > 1; --k) {
      j = arg_[k * (n_ + 1) + j];
      s.stages[k - 2] = j;
    }
    return s;
  }

  /// The largest bottleneck term of a split.
  [[nodiscard]] double worst(const std::vector<int>& stages) const {
    double w = 0;
    for (int s = 0, i = 0; s < p_; ++s) {
      const int j = s + 1 < p_ ? stages[s] : n_;
      w = std::max(w, t_.bottleneck(i, j, t_.time(i, j)));
      i = j;
    }
    return w;
  }

private:
  const stage_table& t_;
  int p_, n_;
  std::vector<double> f_;
  std::vector<int> arg_;
};

/// The least over splits into pp stages of the largest `cost(stage, i, j, the stage's
/// layer maxima)` (a min-max programme). A cost of inf ends the stage's growth: it must stay
/// inf for every longer stage ending at j.
template <class Cost>
double least_max(const stage_table& t, Cost cost) {
  const int p = t.model().kind().pp, n = t.layers();
  std::vector<double> g((p + 1) * (n + 1), inf);
  g[0] = 0;
  for (int k = 1; k <= p; ++k)
    for (int j = k; j <= n - (p - k); ++j) {
      double best = inf;
      cost_model::layer_maxima max;
      for (int i = j - 1; i >= k - 1; --i) {
        max.add(t.model(), i);
        const double c = cost(k - 1, i, j, max);
        if (c == inf) break;
        best = std::min(best, std::max(g[(k - 1) * (n + 1) + i], c));
      }
      g[k * (n + 1) + j] = best;
    }
  return g[p * (n + 1) + n];
}

/// The least over splits of the most memory any stage needs.
double least_memory(const stage_table& t) {
  return least_max(t, [&t](int s, int i, int j, const cost_model::layer_maxima& max) {
    return t.memory(s, i, j, max);
  });
}

/// The best split of one kind, or none; gives up (returning what it has) once no split can
/// beat `cutoff`.
split best_split(const cost_model& cm, double cutoff, double& objective) {
  const stage_table table(cm);
  splitter dp(table);
  split free = dp.best(inf);
  objective = inf;
  if (free.sum == inf) return free;
  const double least_sum = free.sum;
  split best = free;
  objective = free.sum + dp.worst(free.stages);
  const int n = cm.layers();
  std::vector<double> bounds;
  bounds.reserve(static_cast<std::size_t>(n) * (n + 1) / 2);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j <= n; ++j) bounds.push_back(table.bottleneck(i, j, table.time(i, j)));
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  // The smallest feasible bound: the least over splits within memory of the largest term.
  const double budget = cm.budget();
  const double smallest =
      least_max(table, [&](int s, int i, int j, const cost_model::layer_maxima& max) {
        if (table.memory(s, i, j, max) > budget) return inf;
        return table.bottleneck(i, j, table.time(i, j));
      });
  const std::size_t lo = static_cast<std::size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), smallest) - bounds.begin());
  for (std::size_t at = lo; at < bounds.size(); ++at) {
    const double W = bounds[at];
    if (least_sum + W >= std::min(objective, cutoff)) break;
    split s = dp.best(W);
    if (s.sum == inf) continue; // (not expected: W is at least the smallest feasible bound)
    const double value = s.sum + dp.worst(s.stages);
    if (value < objective) {
      objective = value;
      best = std::move(s);
    }
  }
  return best;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return text;
}

/// The `top` best estimates, kept as a heap (worst on top).
class leaderboard {
public:
  explicit leaderboard(int top) : top_(std::max(top, 1)) {}
  [[nodiscard]] double cutoff() const {
    return static_cast<int>(heap_.size()) < top_ ? inf : heap_.front().step_seconds;
  }
  void offer(estimate e) {
    if (e.step_seconds >= cutoff()) return;
    heap_.push_back(std::move(e));
    std::push_heap(heap_.begin(), heap_.end(), worse);
    if (static_cast<int>(heap_.size()) > top_) {
      std::pop_heap(heap_.begin(), heap_.end(), worse);
      heap_.pop_back();
    }
  }
  std::vector<estimate> ranked() {
    std::sort_heap(heap_.begin(), heap_.end(), worse);
    return std::move(heap_);
  }

private:
  static bool worse(const estimate& a, const estimate& b) {
    return a.step_seconds < b.step_seconds;
  }
  int top_;
  std::vector<estimate> heap_;
};

} // namespace

std::vector<plan_kind> enumerate_kinds(const model&, const cluster& c, const training&) {
  std::vector<plan_kind> kinds;
  const int n = c.devices();
  for (int tp : divisors(n))
    for (int pp : divisors(n / tp))
      for (sharding s : {sharding::no_shard, sharding::full_shard, sharding::shard_grad_op,
                         sharding::hybrid_shard})
        kinds.push_back({n / (tp * pp), tp, pp, s, 1});
  return kinds;
}

search_result search(const model& m, const cluster& c, const training& t, int top,
                     const std::function<bool(const plan_kind&)>& keep) {
  search_result r;
  struct candidate {
    double lower_bound;
    plan_kind kind;
  };
  std::vector<candidate> candidates;
  for (const plan_kind& kind : enumerate_kinds(m, c, t)) {
    if (keep && !keep(kind)) continue;
    if (std::string why = kind_problem(m, c, t, kind); !why.empty()) {
      r.infeasible.push_back({kind, std::move(why)});
      continue;
    }
    // The most micro-batches need the least memory on every stage of every split.
    plan_kind smallest = kind;
    smallest.micro = t.global_batch / kind.dp;
    const cost_model least(m, c, t, smallest);
    if (const double need = least_memory(stage_table(least)); need > t.memory_budget_bytes) {
      r.infeasible.push_back({kind, "out of memory: needs at least " + gib(need) +
                                        " per device, the budget is " + gib(t.memory_budget_bytes) +
                                        " (over by " + gib(need - t.memory_budget_bytes) + ")"});
      continue;
    }
    for (int micro : divisors(t.global_batch / kind.dp)) {
      plan_kind k = kind;
      k.micro = micro;
      const cost_model cm(m, c, t, k);
      double sum = 0, largest = 0;
      for (int l = 0; l < cm.layers(); ++l) {
        sum += cm.layer_seconds(l);
        largest = std::max(largest, cm.layer_seconds(l));
      }
      candidates.push_back({sum + (micro - 1) * std::max(sum / k.pp, largest), k});
    }
  }
  r.kinds_considered = static_cast<long>(candidates.size());
  std::sort(candidates.begin(), candidates.end(),
            [](const candidate& a, const candidate& b) { return a.lower_bound < b.lower_bound; });
  leaderboard board(top);
  for (const candidate& cand : candidates) {
    if (cand.lower_bound >= board.cutoff()) break; // and so do all that follow
    ++r.kinds_searched;
    const cost_model cm(m, c, t, cand.kind);
    double objective = inf;
    split s = best_split(cm, board.cutoff(), objective);
    if (objective < board.cutoff()) board.offer(cm.evaluate(s.stages));
  }
  r.ranked = board.ranked();
  return r;
}

search_result brute_force(const model& m, const cluster& c, const training& t, int top) {
  search_result r;
  leaderboard board(top);
  const int n = static_cast<int>(m.layers.size());
  for (plan_kind kind : enumerate_kinds(m, c, t))
    for (int micro = 1; micro <= t.global_batch; ++micro) {
      kind.micro = micro;
      if (!kind_problem(m, c, t, kind).empty()) continue;
      ++r.kinds_considered;
      const cost_model cm(m, c, t, kind);
      // Every choice of pp-1 boundaries among layers 1..n-1, ascending.
      std::vector<int> stages(kind.pp - 1);
      for (int s = 0; s < kind.pp - 1; ++s) stages[s] = s + 1;
      bool found = false;
      estimate best;
      for (;;) {
        estimate e = cm.evaluate(stages);
        if (e.fits && (!found || e.step_seconds < best.step_seconds)) {
          best = std::move(e);
          found = true;
        }
        int s = kind.pp - 2; // next combination
        while (s >= 0 && stages[s] == n - (kind.pp - 1 - s)) --s;
        if (s < 0) break;
        ++stages[s];
        for (int u = s + 1; u < kind.pp - 1; ++u) stages[u] = stages[u - 1] + 1;
      }
      if (found) board.offer(std::move(best));
    }
  r.ranked = board.ranked();
  return r;
}

} // namespace crown::plan
