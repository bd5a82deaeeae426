// The training layer without MPI: every layer's backward against central differences of its
// forward (float64), the whole GPT's gradient likewise, Adam and SGD against hand-computed
// values, plan parsing and validation, and DDP's bucket assignment.
#define BOOST_TEST_MODULE parallel_nn
#include <boost/test/included/unit_test.hpp>
#include <cmath>
#include <crown/error.hpp>
#include <crown/parallel/ddp.hpp>
#include <crown/parallel/gpt.hpp>
#include <crown/parallel/nn.hpp>
#include <crown/parallel/optim.hpp>
#include <crown/parallel/plan.hpp>
#include <crown/parallel/random.hpp>
#include <functional>
#include <vector>

namespace par = crown::parallel;
namespace nn = crown::parallel::nn;
using vec = std::vector<double>;

namespace {

vec random_vec(std::size_t n, std::uint64_t seed, double scale = 1) {
  par::normal_source r(seed);
  vec v(n);
  for (auto& x : v) x = r.next() * scale;
  return v;
}

/// The worst error between `analytic` and central differences of loss() in `x` (h = 1e-6),
/// relative to the tensor's largest gradient (small elements are then not judged by the
/// differences' rounding, about 1e-10 absolute), over every element (or `limit` spread over
/// them), printed like llm.c's check_tensor with the index where it happens.
double check_gradient(const char* name, vec& x, const vec& analytic,
                      const std::function<double()>& loss, std::size_t limit = 400) {
  double worst = 0, scale = 1e-12;
  std::size_t where = 0;
  for (double g : analytic) scale = std::max(scale, std::abs(g));
  const std::size_t stride = std::max<std::size_t>(1, x.size() / limit);
  for (std::size_t i = 0; i < x.size(); i += stride) {
    const double keep = x[i], h = 1e-6;
    x[i] = keep + h;
    const double up = loss();
    x[i] = keep - h;
    const double down = loss();
    x[i] = keep;
    const double numeric = (up - down) / (2 * h);
    const double err = std::abs(numeric - analytic[i]) / scale;
    if (err > worst) worst = err, where = i;
  }
  BOOST_TEST_MESSAGE(name << ": worst error " << worst << " of the largest gradient, at " << where);
  return worst;
}

/// loss = sum(out · weights): dout = weights.
double weighted(const vec& out, const vec& w) {
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
  return s;
}

} // namespace

BOOST_AUTO_TEST_CASE(linear_backward_matches_central_differences) {
  const int N = 5, C = 7, OC = 3;
  vec x = random_vec(N * C, 1), w = random_vec(OC * C, 2), b = random_vec(OC, 3),
      dout = random_vec(N * OC, 4), out(N * OC);
  auto loss = [&] {
    nn::linear_forward<double>(out, x, w, b, N, C, OC);
    return weighted(out, dout);
  };
  vec dx(x.size()), dw(w.size()), db(b.size());
  nn::linear_backward<double>(dx, dw, db, dout, x, w, N, C, OC);
  BOOST_TEST(check_gradient("linear dx", x, dx, loss) < 1e-7);
  BOOST_TEST(check_gradient("linear dw", w, dw, loss) < 1e-7);
  BOOST_TEST(check_gradient("linear db", b, db, loss) < 1e-7);
}

BOOST_AUTO_TEST_CASE(layer_norm_backward_matches_central_differences) {
  const int N = 4, C = 9;
  vec x = random_vec(N * C, 5, 2), w = random_vec(C, 6), b = random_vec(C, 7),
      dout = random_vec(N * C, 8), out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    nn::layer_norm_forward<double>(out, mean, rstd, x, w, b, N, C);
    return weighted(out, dout);
  };
  loss();
  vec dx(x.size()), dw(w.size()), db(b.size());
  nn::layer_norm_backward<double>(dx, dw, db, dout, x, w, mean, rstd, N, C);
  BOOST_TEST(check_gradient("layer_norm dx", x, dx, loss) < 1e-6);
  BOOST_TEST(check_gradient("layer_norm dw", w, dw, loss) < 1e-7);
  BOOST_TEST(check_gradient("layer_norm db", b, db, loss) < 1e-7);
}

BOOST_AUTO_TEST_CASE(gelu_and_attention_backward_match_central_differences) {
  vec x = random_vec(50, 9, 2), dout = random_vec(50, 10), out(50);
  auto gelu_loss = [&] {
    nn::gelu_forward<double>(out, x);
    return weighted(out, dout);
  };
  vec dx(50);
  nn::gelu_backward<double>(dx, x, dout);
  BOOST_TEST(check_gradient("gelu", x, dx, gelu_loss) < 1e-7);

  const int B = 2, T = 5, C = 8, NH = 2;
  vec qkv = random_vec(B * T * 3 * C, 11), d = random_vec(B * T * C, 12), o(B * T * C),
      att(B * NH * T * T), scratch(2 * T * T);
  auto att_loss = [&] {
    nn::attention_forward<double>(o, att, qkv, B, T, C, NH);
    return weighted(o, d);
  };
  att_loss();
  vec dqkv(qkv.size());
  nn::attention_backward<double>(dqkv, scratch, d, qkv, att, B, T, C, NH);
  BOOST_TEST(check_gradient("attention dqkv", qkv, dqkv, att_loss) < 1e-6);
  // causality: the output at t = 0 depends on the first value vector only
  for (int c = 0; c < C / NH; ++c)
    BOOST_TEST(o[c] == qkv[2 * C + c], boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(gelus_float_tanh_is_within_5_ulps_of_std_tanh) {
  double worst = 0;
  for (float x = -12.0f; x <= 12.0f; x += 1.0f / 1024)
    worst = std::max(worst, std::abs(double(nn::tanh_for_gelu(x)) - std::tanh(double(x))));
  BOOST_TEST_MESSAGE("float tanh: worst absolute error " << worst);
  BOOST_TEST(worst < 3.1e-7); // 5 float ulps near 1
  BOOST_TEST(nn::tanh_for_gelu(0.0f) == 0.0f);
  BOOST_TEST(nn::tanh_for_gelu(-3.0f) == -nn::tanh_for_gelu(3.0f));
}

BOOST_AUTO_TEST_CASE(cross_entropy_backward_matches_central_differences) {
  const int N = 6, V = 11;
  vec logits = random_vec(N * V, 13, 3), probs(N * V);
  const std::vector<int> targets{0, 3, 10, 5, 5, 1};
  auto loss = [&] {
    probs = logits;
    return nn::cross_entropy_forward<double>(probs, targets, N, V);
  };
  loss();
  vec d = probs;
  nn::cross_entropy_backward<double>(d, targets, N, V, 1.0 / N);
  BOOST_TEST(check_gradient("cross_entropy", logits, d, loss) < 1e-7);
}

BOOST_AUTO_TEST_CASE(the_whole_gpt_gradient_matches_central_differences_for_every_tensor) {
  const par::gpt_config c{.vocabulary = 16, .context = 6, .channels = 8, .heads = 2, .blocks = 2};
  par::gpt<double> m(c, 3);
  m.initialise(42);
  for (auto& p : m.params()) p += 0.05 * std::sin(double(&p - m.params().data())); // off 0 and 1
  std::vector<int> in, out;
  for (int i = 0; i < 3 * c.context; ++i) {
    in.push_back(int(par::mix64(std::uint64_t(i)) % 16));
    out.push_back(int(par::mix64(std::uint64_t(i) + 100) % 16));
  }
  m.forward(in, out, 3);
  vec grads(m.layout().total);
  std::vector<std::size_t> order;
  m.backward(grads, 1.0, [&](std::size_t e) { order.push_back(e); });
  // every entry became ready exactly once, in reverse entry order (the flat array's)
  BOOST_TEST(order.size() == m.layout().entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) BOOST_TEST(order[i] == order.size() - 1 - i);
  vec params(m.params().begin(), m.params().end());
  for (const auto& e : m.layout().entries) {
    vec x(params.begin() + std::ptrdiff_t(e.offset),
          params.begin() + std::ptrdiff_t(e.offset + e.count));
    const vec g(grads.begin() + std::ptrdiff_t(e.offset),
                grads.begin() + std::ptrdiff_t(e.offset + e.count));
    auto loss = [&] {
      std::copy(x.begin(), x.end(), m.params().begin() + std::ptrdiff_t(e.offset));
      return double(m.forward(in, out, 3));
    };
    BOOST_TEST(check_gradient(e.name.c_str(), x, g, loss, 24) < 1e-5, e.name);
    std::copy(x.begin(), x.end(), m.params().begin() + std::ptrdiff_t(e.offset));
  }
}

BOOST_AUTO_TEST_CASE(the_layout_is_reverse_order_and_complete) {
  const par::gpt_config c{
      .vocabulary = 256, .context = 64, .channels = 128, .heads = 4, .blocks = 4};
  const auto l = par::param_layout::of(c);
  // 12 L C^2 + 13 L C + V C (embedding) + T C + 2 C + V C (output layer)
  const std::size_t L = 4, C = 128, V = 256, T = 64;
  BOOST_TEST(l.total == 12 * L * C * C + 13 * L * C + 2 * V * C + T * C + 2 * C);
  BOOST_TEST(l.entries.front().name == "wte");
  BOOST_TEST(l.entries.back().name == "lm_head.w");
  BOOST_TEST(l.entries.back().offset == 0u);
  BOOST_TEST(l.entries.front().offset + l.entries.front().count == l.total);
  BOOST_TEST(l.at("h2.attn.qkv.w").count == 3 * C * C);
  BOOST_CHECK_THROW((void)l.at("h9.nothing"), crown::argument_error);
}

BOOST_AUTO_TEST_CASE(adam_and_sgd_follow_pytorch_formulas) {
  vec p{1.0, -2.0}, g{0.5, -0.25};
  par::adam<double> a(2, {.lr = 0.1});
  a.step(p, g);
  // step 1: m = 0.1 g, v = 0.001 g^2; p -= 0.1/0.1 * m / (sqrt(v)/sqrt(0.001) + 1e-8)
  BOOST_TEST(p[0] == 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(p[1] == -2.0 + 0.1 * 0.25 / (0.25 + 1e-8), boost::test_tools::tolerance(1e-15));
  vec q{1.0}, h{2.0};
  par::sgd<double> s(1, {.lr = 0.5, .momentum = 0.9});
  s.step(q, h); // b = 2, q = 0
  s.step(q, h); // b = 0.9*2 + 2 = 3.8, q = -1.9
  BOOST_TEST(q[0] == -1.9, boost::test_tools::tolerance(1e-15));
  BOOST_CHECK_THROW(s.step(q, vec{1.0, 2.0}), crown::argument_error);
}

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const crown::argument_error& e) {
    return e.what();
  }
  return "no error";
}
bool contains(const std::string& s, const std::string& part) {
  const bool yes = s.find(part) != std::string::npos;
  if (!yes) BOOST_TEST_MESSAGE("'" << part << "' not in: " << s);
  return yes;
}
} // namespace

BOOST_AUTO_TEST_CASE(plans_parse_print_and_refuse_bad_text) {
  const auto p = par::parse_plan("dp=2,tp=2,pp=2,fsdp=full,micro=4,stages=3");
  BOOST_TEST(p.dp == 2);
  BOOST_TEST(p.tp == 2);
  BOOST_TEST(p.pp == 2);
  BOOST_TEST((p.fsdp == par::fsdp_strategy::full_shard));
  BOOST_TEST(p.microbatches == 4);
  BOOST_TEST(p.stages == std::vector<int>{3});
  BOOST_TEST(p.to_string() == "dp=2,tp=2,pp=2,fsdp=full,micro=4,stages=3");
  BOOST_TEST((par::parse_plan(p.to_string()) == p));
  BOOST_TEST((par::parse_plan("fsdp=SHARD_GRAD_OP").fsdp == par::fsdp_strategy::shard_grad_op));
  BOOST_TEST(par::parse_plan("dp=1").to_string() == "dp=1");
  for (auto [text, why] : std::vector<std::pair<const char*, const char*>>{
           {"", "empty"},
           {"dp=0", "dp must be a positive integer, not '0'"},
           {"dp=2,dp=2", "dp is given twice"},
           {"dq=2", "unknown key 'dq'"},
           {"dp", "'dp' is not key=value"},
           {"fsdp=half", "fsdp must be one of no, full, grad_op, hybrid"},
           {"dp=2,", "'' is not key=value"},
           {"stages=2:x", "not 'x'"}})
    BOOST_TEST(contains(error_of([&] { (void)par::parse_plan(text); }), why), text);
}

BOOST_AUTO_TEST_CASE(plans_are_validated_against_the_job_before_work) {
  const par::plan_limits job{
      .workers = 4, .batch = 8, .blocks = 4, .heads = 4, .channels = 128, .vocabulary = 256};
  par::validate(par::parse_plan("dp=4"), job);
  par::validate(par::parse_plan("dp=4,micro=8"), job);
  par::validate(par::parse_plan("dp=4,fsdp=full"), job);
  par::validate(par::parse_plan("dp=2,tp=2"), job);
  par::validate(par::parse_plan("dp=2,pp=2,micro=4,stages=3"), job);
  par::validate(par::parse_plan("dp=4,fsdp=SHARD_GRAD_OP,micro=2"), job);
  auto why = [&](const char* text, par::plan_limits l) {
    return error_of([&] { par::validate(par::parse_plan(text), l); });
  };
  BOOST_TEST(contains(why("dp=2", job), "dp x tp x pp = 2 x 1 x 1 = 2 workers, but the job has 4"));
  BOOST_TEST(
      contains(why("dp=4,micro=3", job), "3 micro-batches do not divide the batch of 8 samples"));
  BOOST_TEST(
      contains(why("dp=1,tp=4", {4, 8, 4, 6, 128, 256}), "tp=4 does not divide the 6 heads"));
  BOOST_TEST(contains(why("pp=4,stages=1:3", job), "2 stage boundaries given; pp=4 needs 3"));
  BOOST_TEST(contains(why("pp=2,dp=2,stages=4", job), "within (0, 4) blocks; 4 does not"));
  BOOST_TEST(contains(why("pp=4,dp=1", {4, 8, 2, 4, 128, 256}), "pp=4 is more stages than the 2"));
}

BOOST_AUTO_TEST_CASE(buckets_follow_pytorch_assignment_in_reverse_parameter_order) {
  const par::gpt_config c{
      .vocabulary = 256, .context = 64, .channels = 256, .heads = 4, .blocks = 6};
  const auto l = par::param_layout::of(c);
  const auto b = par::assign_buckets(l, 4); // float: 1 MiB first, then 25 MiB
  std::size_t next = 0, entries = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    BOOST_TEST(b[i].offset == next); // contiguous, from the front of the flat array
    next += b[i].count;
    entries += b[i].entries.size();
    const std::size_t cap = i == 0 ? (1u << 20) : (25u << 20);
    if (i + 1 < b.size()) { // closed once it reached its cap, not before
      BOOST_TEST(b[i].count * 4 >= cap);
      BOOST_TEST((b[i].count - l.entries[b[i].entries.back()].count) * 4 < cap);
    }
  }
  BOOST_TEST(next == l.total);
  BOOST_TEST(entries == l.entries.size());
  BOOST_TEST(b.front().entries.front() == l.entries.size() - 1); // lm_head first
  BOOST_TEST(b.back().entries.back() == 0u);                     // wte last
  BOOST_TEST(b.size() == 2u); // 1 MiB, then the remaining 4.7 M floats (19 MiB)
}
