// crown-controller-demo: one controller (rank 0) drives a 2-D actor mesh on the other
// ranks: spawn, call, slice, reduce, a collective among actors, and a caught failure.
//   mpirun -np 5 crown-controller-demo      (1 controller + 4 workers: a 2 x 2 mesh)
#include <crown/crown.hpp>
#include <cstdio>
#include <stdexcept>

namespace {

/// A toy "trainer": holds one number and can step, report, and average with its peers.
class trainer {
public:
  explicit trainer(double lr) : lr_(lr), weight_(crown::this_actor().index) {}
  double step(double gradient) { return weight_ -= lr_ * gradient; }
  double weight() const { return weight_; }
  /// All-reduce among the actors of this trainer's data-parallel group: a collective on
  /// the actor mesh's own sub-mesh, like gradient averaging.
  double average_over_dp() {
    const crown::mesh dp = crown::this_actor().mesh.sub({"dp"});
    double w = weight_;
    crown::co_sum(dp, w);
    return weight_ = w / dp.size();
  }
  void check(double limit) const {
    if (weight_ >= limit)
      throw std::range_error("weight " + std::to_string(weight_) + " not below " +
                             std::to_string(limit));
  }
  static constexpr auto endpoints = crown::endpoints(&trainer::step, &trainer::weight,
                                                     &trainer::average_over_dp, &trainer::check);

private:
  double lr_;
  double weight_;
};

void print(const char* what, const crown::value_mesh<double>& v) {
  std::printf("%s:", what);
  for (double x : v) std::printf(" %.3f", x);
  std::printf("\n");
}

} // namespace

int main(int argc, char** argv) {
  crown::runtime rt(argc, argv);
  return rt.control([](crown::controller& c) {
    const int workers = c.workers().mesh().size();
    const int dp = workers % 2 == 0 ? 2 : 1;
    auto mesh = c.workers().reshape({{"dp", dp}, {"tp", workers / dp}});
    auto trainers = mesh.spawn<trainer>("trainers", 0.5);
    std::printf("spawned %d trainers on %s\n", workers, trainers.mesh().to_string().c_str());
    print("weights", trainers.call(&trainer::weight).get());
    print("after step(1.0)", trainers.call(&trainer::step, 1.0).get());
    print("tp=0 slice, step(2.0)", trainers.slice("tp", 0).call(&trainer::step, 2.0).get());
    print("after averaging over dp", trainers.call(&trainer::average_over_dp).get());
    std::printf("sum of weights (reduced along the tree): %.3f\n",
                trainers.reduce(crown::reduce_op::sum, &trainer::weight).get());
    try {
      const double first = trainers.call_one({0, 0}, &trainer::weight).get();
      trainers.call(&trainer::check, first).get(); // fails where weight >= the first one
    } catch (const crown::actor_error& e) {
      std::printf("caught actor_error with %zu failed points; first: %s on rank %d: %s: %s\n",
                  e.failures().size(), e.failures()[0].mesh.c_str(), e.failures()[0].rank,
                  e.failures()[0].type.c_str(), e.failures()[0].message.c_str());
    }
    std::printf("controller demo done\n");
  });
}
