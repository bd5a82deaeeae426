// include/crown/plan/search.hpp — the planner: every plan kind (dp, tp, pp, sharding,
// micro-batches) with its best contiguous stage boundaries, exact under the cost model.
#pragma once
#include <crown/plan/cost.hpp>
#include <functional>
#include <string>
#include <vector>

namespace crown::plan {

/// A kind (without micro-batches) that no micro-batch count or stage split can run.
struct infeasible_kind {
  plan_kind kind;
  std::string reason;
};

struct search_result {
  std::vector<estimate> ranked;            ///< best first; at most `top`, one per plan kind
  std::vector<infeasible_kind> infeasible; ///< every (dp, tp, pp, sharding) that cannot run
  long kinds_considered = 0;               ///< (dp, tp, pp, sharding, micro) enumerated
  long kinds_searched = 0;                 ///< of those, searched (the rest bounded out)
};

/// The best `top` plans over all devices of `c`. For each kind: stage boundaries by dynamic
/// programming over an enumerated bottleneck bound; kinds whose lower bound cannot beat the
/// `top`-th best are skipped. Exact: the first plan's step time equals brute_force()'s.
/// `keep`, when given, restricts the search to the kinds (micro-batches aside) it accepts.
[[nodiscard]] search_result search(const model& m, const cluster& c, const training& t,
                                   int top = 10,
                                   const std::function<bool(const plan_kind&)>& keep = {});

/// Every kind and every split into contiguous stages, each evaluated directly. Only for
/// small cases (the number of splits is a binomial coefficient in the layers).
[[nodiscard]] search_result brute_force(const model& m, const cluster& c, const training& t,
                                        int top = 1);

/// The (dp, tp, pp) degrees that use all `devices`, tp dividing nothing in particular.
[[nodiscard]] std::vector<plan_kind> enumerate_kinds(const model& m, const cluster& c,
                                                     const training& t);

} // namespace crown::plan
