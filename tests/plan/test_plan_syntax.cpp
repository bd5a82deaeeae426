// crown-plan's plans print in the syntax crown-train --plan reads (a test of its own: it
// links libcrown_parallel, which the planner does not).
#include <boost/test/unit_test.hpp>
#include <crown/parallel/plan.hpp>
#include <crown/plan/cost.hpp>

namespace plan = crown::plan;

// Plans print in the syntax crown-train --plan reads (crown::parallel::parse_plan).
BOOST_AUTO_TEST_CASE(plans_print_in_crown_train_syntax) {
  for (auto s : {plan::sharding::no_shard, plan::sharding::full_shard,
                 plan::sharding::shard_grad_op, plan::sharding::hybrid_shard}) {
    const plan::plan_choice p{{4, 2, 3, s, 6}, {5, 9}};
    const auto parsed = crown::parallel::parse_plan(plan::to_string(p));
    BOOST_TEST(parsed.dp == 4);
    BOOST_TEST(parsed.tp == 2);
    BOOST_TEST(parsed.pp == 3);
    BOOST_TEST(static_cast<int>(parsed.fsdp) == static_cast<int>(s));
    BOOST_TEST(parsed.microbatches == 6);
    BOOST_TEST((parsed.stages == std::vector<int>{5, 9}));
    BOOST_TEST(parsed.to_string() == plan::to_string(p));
  }
}
