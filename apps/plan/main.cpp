// crown-plan: the best parallel plans for a model on a cluster, from three JSON files
// (docs/parallel.md, "Planning: crown-plan"). Plans print in crown-train's --plan syntax.
#include <crown/error.hpp>
#include <crown/plan/search.hpp>
#include <cstdio>
#include <cstdlib>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <string>
#include <string_view>

namespace {

constexpr double gib = 1024.0 * 1024 * 1024;

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --model FILE --cluster FILE --training FILE [--top N] [--json]\n"
               "          [--only dp=D,tp=T,pp=P[,fsdp=S]] [--no-fsdp]\n"
               "  Ranks every plan (dp, tp, pp, FSDP sharding, micro-batches, stage boundaries)\n"
               "  that uses all the cluster's devices by predicted step time, and lists every\n"
               "  plan kind that cannot run with the reason. --only costs one kind (any\n"
               "  micro-batches, the best stage boundaries), e.g. a hand-tuned one; --no-fsdp\n"
               "  leaves out the FSDP strategies (DDP, TP and PP only, as Megatron-LM).\n",
               argv0);
  return 2;
}

void print_table(const crown::plan::search_result& r, const crown::plan::model& m) {
  const bool tokens = m.tokens_per_sample > 0;
  std::printf("%-4s %-44s %10s %12s %9s %9s %9s %9s %7s %6s\n", "rank", "plan", "step_s",
              tokens ? "tokens/s" : "samples/s", "state_GiB", "gath_GiB", "act_GiB", "total_GiB",
              "bubble", "comm");
  int rank = 0;
  for (const auto& e : r.ranked) {
    const double rate = e.samples_per_second * (tokens ? m.tokens_per_sample : 1);
    std::printf("%-4d %-44s %10.4g %12.4g %9.2f %9.2f %9.2f %9.2f %6.1f%% %5.1f%%\n", ++rank,
                crown::plan::to_string(e.plan).c_str(), e.step_seconds, rate,
                e.memory.model_state / gib, e.memory.gathered / gib, e.memory.activations / gib,
                e.memory.total() / gib, 100 * e.bubble_fraction, 100 * e.communication_share);
  }
  std::printf("\n%zu infeasible plan kinds (of dp x tp x pp x sharding); %ld kinds with "
              "micro-batches considered, %ld searched:\n",
              r.infeasible.size(), r.kinds_considered, r.kinds_searched);
  for (const auto& k : r.infeasible)
    std::printf("  %-36s %s\n", crown::plan::to_string({k.kind, {}}, false).c_str(),
                k.reason.c_str());
}

void print_json(const crown::plan::search_result& r, const crown::plan::model& m) {
  rapidjson::StringBuffer out;
  rapidjson::Writer<rapidjson::StringBuffer> w(out);
  w.StartObject();
  w.Key("plans");
  w.StartArray();
  for (const auto& e : r.ranked) {
    w.StartObject();
    w.Key("plan");
    w.String(crown::plan::to_string(e.plan).c_str());
    for (auto [key, v] : {std::pair{"dp", e.plan.kind.dp},
                          {"tp", e.plan.kind.tp},
                          {"pp", e.plan.kind.pp},
                          {"micro", e.plan.kind.micro}}) {
      w.Key(key);
      w.Int(v);
    }
    w.Key("stages");
    w.StartArray();
    for (int s : e.plan.stages) w.Int(s);
    w.EndArray();
    const std::pair<const char*, double> figures[] = {
        {"step_seconds", e.step_seconds},
        {"samples_per_second", e.samples_per_second},
        {"tokens_per_second", e.samples_per_second * m.tokens_per_sample},
        {"model_state_bytes", e.memory.model_state},
        {"gathered_bytes", e.memory.gathered},
        {"activation_bytes", e.memory.activations},
        {"memory_bytes", e.memory.total()},
        {"bubble_fraction", e.bubble_fraction},
        {"communication_share", e.communication_share}};
    for (auto [key, v] : figures) {
      w.Key(key);
      w.Double(v);
    }
    w.Key("stage_seconds");
    w.StartArray();
    for (double s : e.stage_seconds) w.Double(s);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("infeasible");
  w.StartArray();
  for (const auto& k : r.infeasible) {
    w.StartObject();
    w.Key("plan");
    w.String(crown::plan::to_string({k.kind, {}}, false).c_str());
    w.Key("reason");
    w.String(k.reason.c_str());
    w.EndObject();
  }
  w.EndArray();
  w.Key("kinds_considered");
  w.Int64(r.kinds_considered);
  w.Key("kinds_searched");
  w.Int64(r.kinds_searched);
  w.EndObject();
  std::printf("%s\n", out.GetString());
}

} // namespace

int main(int argc, char** argv) {
  std::string model_file, cluster_file, training_file;
  int top = 10;
  bool json = false;
  std::string only;
  bool no_fsdp = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--model" && has_value)
      model_file = argv[++i];
    else if (a == "--cluster" && has_value)
      cluster_file = argv[++i];
    else if (a == "--training" && has_value)
      training_file = argv[++i];
    else if (a == "--top" && has_value) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 1000000000) {
        std::fprintf(stderr, "crown-plan: --top must be a positive integer, not '%s'\n", argv[i]);
        return 2;
      }
      top = static_cast<int>(n);
    } else if (a == "--only" && has_value)
      only = argv[++i];
    else if (a == "--no-fsdp")
      no_fsdp = true;
    else if (a == "--json")
      json = true;
    else
      return usage(argv[0]);
  }
  if (model_file.empty() || cluster_file.empty() || training_file.empty()) return usage(argv[0]);
  try {
    using namespace crown::plan;
    const std::string mw = "model file '" + model_file + "'";
    const std::string cw = "cluster file '" + cluster_file + "'";
    const std::string tw = "training file '" + training_file + "'";
    const model m = parse_model(read_file(model_file), mw);
    const cluster c = parse_cluster(read_file(cluster_file), cw);
    const training t = parse_training(read_file(training_file), tw);
    check_consistent(c, cw, t, tw);
    const auto keep = [&](const plan_kind& k) {
      return (only.empty() || to_string(plan_choice{k, {}}, false) == only) &&
             (!no_fsdp || k.shard == sharding::no_shard);
    };
    const search_result r = search(m, c, t, top, keep);
    if (json)
      print_json(r, m);
    else
      print_table(r, m);
    if (r.ranked.empty()) {
      std::fprintf(stderr,
                   "crown-plan: no plan fits: none of the %zu plan kinds for %d devices can run "
                   "this model (reasons above)\n",
                   r.infeasible.size(), c.devices());
      return 1;
    }
  } catch (const crown::error& e) {
    std::fprintf(stderr, "crown-plan: %s\n", e.what());
    return 1;
  }
  return 0;
}
