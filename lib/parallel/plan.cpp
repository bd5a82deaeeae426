// The parallel plan: parsing, printing, validation and its mesh (include/crown/parallel/plan.hpp).
#include <algorithm>
#include <array>
#include <charconv>
#include <crown/error.hpp>
#include <crown/parallel/plan.hpp>

namespace crown::parallel {

namespace {

struct strategy_name {
  fsdp_strategy strategy;
  std::string_view short_name, torch_name;
};
constexpr std::array<strategy_name, 4> strategy_names{{
    {fsdp_strategy::no_shard, "no", "NO_SHARD"},
    {fsdp_strategy::full_shard, "full", "FULL_SHARD"},
    {fsdp_strategy::shard_grad_op, "grad_op", "SHARD_GRAD_OP"},
    {fsdp_strategy::hybrid_shard, "hybrid", "HYBRID_SHARD"},
}};

[[noreturn]] void bad_plan(std::string_view text, const std::string& why) {
  throw argument_error("plan '" + std::string(text) + "'", why);
}

int positive(std::string_view text, std::string_view key, std::string_view value) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc{} || end != value.data() + value.size() || v < 1)
    bad_plan(text,
             std::string(key) + " must be a positive integer, not '" + std::string(value) + "'");
  return v;
}

} // namespace

std::string_view to_string(fsdp_strategy s) {
  for (const auto& n : strategy_names)
    if (n.strategy == s) return n.torch_name;
  return "?";
}

std::string plan::to_string() const {
  std::string s = "dp=" + std::to_string(dp);
  if (tp != 1) s += ",tp=" + std::to_string(tp);
  if (pp != 1) s += ",pp=" + std::to_string(pp);
  if (fsdp != fsdp_strategy::no_shard)
    for (const auto& n : strategy_names)
      if (n.strategy == fsdp) s += ",fsdp=" + std::string(n.short_name);
  if (microbatches != 1) s += ",micro=" + std::to_string(microbatches);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    s += i == 0 ? ",stages=" : ":";
    s += std::to_string(stages[i]);
  }
  return s;
}

plan parse_plan(std::string_view text) {
  plan p;
  std::vector<std::string> seen;
  if (text.empty()) bad_plan(text, "empty; write e.g. dp=2");
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      bad_plan(text, std::string(item).insert(0, 1, '\'') + "' is not key=value");
    const std::string key(item.substr(0, eq));
    const std::string_view value = item.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      bad_plan(text, key + " is given twice");
    seen.push_back(key);
    if (key == "dp") {
      p.dp = positive(text, key, value);
    } else if (key == "tp") {
      p.tp = positive(text, key, value);
    } else if (key == "pp") {
      p.pp = positive(text, key, value);
    } else if (key == "micro") {
      p.microbatches = positive(text, key, value);
    } else if (key == "fsdp") {
      const auto it = std::find_if(strategy_names.begin(), strategy_names.end(), [&](auto& n) {
        return n.short_name == value || n.torch_name == value;
      });
      if (it == strategy_names.end())
        bad_plan(text, "fsdp must be one of no, full, grad_op, hybrid (or NO_SHARD, FULL_SHARD, "
                       "SHARD_GRAD_OP, HYBRID_SHARD), not '" +
                           std::string(value) + "'");
      p.fsdp = it->strategy;
    } else if (key == "stages") {
      std::size_t at = 0;
      while (at <= value.size()) {
        const std::size_t colon = std::min(value.find(':', at), value.size());
        p.stages.push_back(positive(text, "each stage boundary", value.substr(at, colon - at)));
        at = colon + 1;
      }
    } else {
      bad_plan(text, "unknown key '" + key + "' (known: dp, tp, pp, fsdp, micro, stages)");
    }
  }
  return p;
}

void validate(const plan& p, const plan_limits& l) {
  const std::string where = "plan " + p.to_string();
  if (p.workers() != l.workers)
    throw argument_error(where, "dp x tp x pp = " + std::to_string(p.dp) + " x " +
                                    std::to_string(p.tp) + " x " + std::to_string(p.pp) + " = " +
                                    std::to_string(p.workers()) + " workers, but the job has " +
                                    std::to_string(l.workers));
  if (p.microbatches > 16383) // pipeline messages are tagged 2k and 2k + 1 (MPI: >= 32767)
    throw argument_error(where, std::to_string(p.microbatches) +
                                    " micro-batches: at most 16383 (MPI tags of the pipeline)");
  if (l.batch % p.microbatches != 0)
    throw argument_error(where, std::to_string(p.microbatches) +
                                    " micro-batches do not divide the batch of " +
                                    std::to_string(l.batch) + " samples per data-parallel rank");
  if (!p.stages.empty()) {
    if (static_cast<int>(p.stages.size()) != p.pp - 1)
      throw argument_error(where, std::to_string(p.stages.size()) + " stage boundaries given; pp=" +
                                      std::to_string(p.pp) + " needs " + std::to_string(p.pp - 1));
    int previous = 0;
    for (int b : p.stages) {
      if (b <= previous || b >= l.blocks)
        throw argument_error(where, "stage boundaries must ascend strictly within (0, " +
                                        std::to_string(l.blocks) + ") blocks; " +
                                        std::to_string(b) + " does not");
      previous = b;
    }
  }
  if (p.pp > l.blocks)
    throw argument_error(where, "pp=" + std::to_string(p.pp) + " is more stages than the " +
                                    std::to_string(l.blocks) + " blocks");
  for (auto [what, n] : {std::pair{"heads", l.heads}, std::pair{"channels", l.channels},
                         std::pair{"vocabulary", l.vocabulary}})
    if (n % p.tp != 0)
      throw argument_error(where, "tp=" + std::to_string(p.tp) + " does not divide the " +
                                      std::to_string(n) + " " + what);
}

mesh make_mesh(const plan& p, const mesh& workers) {
  if (workers.size() != p.workers())
    throw argument_error("plan " + p.to_string(), "needs " + std::to_string(p.workers()) +
                                                      " workers, the mesh " + workers.to_string() +
                                                      " has " + std::to_string(workers.size()));
  return mesh({{"pp", p.pp}, {"dp", p.dp}, {"tp", p.tp}},
              std::vector<int>(workers.ranks().begin(), workers.ranks().end()));
}

} // namespace crown::parallel
