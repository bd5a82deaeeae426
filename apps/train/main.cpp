// crown-train: trains a character-level GPT on English text under a parallel plan.
//   mpirun -np 2 crown-train --plan dp=2 [options]              (SPMD: every rank trains)
//   mpirun -np 3 crown-train --plan dp=2 --controller [options] (rank 0 drives 2 trainer actors)
// Prints progress (a bar on a terminal), the final loss, sampled text; writes the loss curve
// as CSV (--csv) and a PNG plot (--plot); --checkpoint-every N writes checkpoints that
// --resume continues from (at any data-parallel rank count). Deterministic given --seed:
// in double precision the loss of every step matches the single-rank run of the same
// global batch to ~1e-15, and a run resumed under the same plan matches an uninterrupted
// one bitwise. With --checkpoint-every, SIGTERM or SIGUSR1 (Slurm's requeue, preemption,
// or a job script's trap before the time limit) makes it checkpoint after the step the
// ranks agree on and exit with crown::stop_exit_status (75); --resume continues there
// (jobscripts/README.md).
#include "planning.hpp"
#include "report.hpp"
#include <array>
#include <cctype>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <chrono>
#include <climits>
#include <crown/checkpoint.hpp>
#include <crown/crown.hpp>
#include <crown/parallel/nn.hpp>
#include <crown/parallel/trainer.hpp>
#include <crown/stop_signal.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace crown::parallel { // wire formats of the options (controller mode's spawn)
template <class A>
void serialize(A& a, gpt_config& c) {
  a(c.vocabulary, c.context, c.channels, c.heads, c.blocks);
}
template <class A>
void serialize(A& a, plan& p) {
  a(p.dp, p.tp, p.pp, p.fsdp, p.microbatches, p.stages);
}
template <class A>
void serialize(A& a, ddp_options& d) {
  a(d.first_bucket_bytes, d.bucket_bytes, d.heap_buckets);
}
template <class A>
void serialize(A& a, train_options& o) {
  a(o.model, o.plan, o.batch, o.seed, o.optimizer, o.lr, o.ddp);
}
} // namespace crown::parallel

namespace {

namespace par = crown::parallel;

struct app_options {
  par::train_options train;
  std::string plan_text = "dp=1";
  std::string data = "/usr/share/games/fortunes";
  std::string dtype = "float";
  std::string csv, plot;
  long steps = 100;
  int eval_every = 0, eval_batches = 4, sample_bytes = 300, threads = 1;
  std::string checkpoint_dir = "checkpoints";
  int checkpoint_every = 0, keep = 2;
  bool resume = false;
  train::progress_style progress = train::progress_style::automatic;
  bool controller = false, memory_report = false;
  // Planning (planning.hpp): --plan auto, --calibrate, predictions, the memory check.
  bool auto_plan = false, calibrate = false;
  std::string cluster_file, model_file;
  int global_batch = 0, top = 5;
  double memory_budget = 0; ///< bytes per rank; 0: no check (auto: the cluster's memory)
  double predicted_step = 0, predicted_memory = 0; ///< the planner's, for the CSV
  /// What every worker needs, on the wire (controller mode).
  template <class A>
  void serialize(A& a) {
    a(train, data, dtype);
  }
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(
      stderr,
      "crown-train: %s\n"
      "usage: mpirun -np N crown-train [--plan dp=N] [--controller] [--steps S] [--batch B]\n"
      "         [--micro M] [--context T] [--channels C] [--heads H] [--blocks L]\n"
      "         [--dtype float|double] [--optimizer adam|sgd] [--lr X] [--seed S]\n"
      "         [--data FILE|DIR] [--csv FILE] [--plot FILE.png] [--eval-every N]\n"
      "         [--eval-batches N] [--sample BYTES] [--threads N] [--memory-report]\n"
      "         [--progress auto|bar|lines|none] [--quiet] [--checkpoint-every N]\n"
      "         [--checkpoint-dir DIR] [--keep N] [--resume] [--bucket-bytes N]\n"
      "         [--plan auto] [--calibrate] [--cluster FILE] [--model-file FILE]\n"
      "         [--global-batch G] [--memory-budget BYTES[K|M|G]] [--top N]\n",
      problem.c_str());
  std::exit(2);
}

double real(std::string_view flag, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (!*text || *end) usage(std::string(flag) + " needs a number, not '" + text + "'");
  return v;
}

long number(std::string_view flag, const char* text, long low = 1, long high = INT_MAX) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (!*text || *end || v < low || v > high)
    usage(std::string(flag) + " needs a whole number from " + std::to_string(low) + " to " +
          std::to_string(high) + ", not '" + text + "'");
  return v;
}

/// "512M", "2G", "1048576": bytes.
double bytes_of(std::string_view flag, const char* text) {
  std::string t = text;
  double scale = 1;
  if (!t.empty() &&
      std::string_view("KMG").find(char(std::toupper(t.back()))) != std::string_view::npos) {
    scale = std::toupper(t.back()) == 'K'   ? 1024.0
            : std::toupper(t.back()) == 'M' ? 1048576.0
                                            : 1073741824.0;
    t.pop_back();
  }
  const double v = real(flag, t.c_str()) * scale;
  if (!(v > 0)) usage(std::string(flag) + " needs a positive size, not '" + text + "'");
  return v;
}

train::progress_style progress_of(std::string_view v) {
  if (v == "auto") return train::progress_style::automatic;
  if (v == "bar") return train::progress_style::bar;
  if (v == "lines") return train::progress_style::lines;
  if (v != "none")
    usage("--progress must be auto, bar, lines or none, not '" + std::string(v) + "'");
  return train::progress_style::none;
}

app_options parse(int argc, char** argv) {
  app_options o;
  int micro = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(std::string(a) + " needs a value");
      return argv[++i];
    };
    auto& m = o.train.model;
    if (a == "--plan")
      o.plan_text = next();
    else if (a == "--controller")
      o.controller = true;
    else if (a == "--steps")
      o.steps = number(a, next());
    else if (a == "--batch")
      o.train.batch = int(number(a, next()));
    else if (a == "--micro")
      micro = int(number(a, next()));
    else if (a == "--context")
      m.context = int(number(a, next()));
    else if (a == "--channels")
      m.channels = int(number(a, next()));
    else if (a == "--heads")
      m.heads = int(number(a, next()));
    else if (a == "--blocks")
      m.blocks = int(number(a, next()));
    else if (a == "--dtype")
      o.dtype = next();
    else if (a == "--optimizer")
      o.train.optimizer = next();
    else if (a == "--lr")
      o.train.lr = real(a, next());
    else if (a == "--seed")
      o.train.seed = std::uint64_t(number(a, next(), 0, LONG_MAX));
    else if (a == "--data")
      o.data = next();
    else if (a == "--csv")
      o.csv = next();
    else if (a == "--plot")
      o.plot = next();
    else if (a == "--eval-every")
      o.eval_every = int(number(a, next(), 0));
    else if (a == "--eval-batches")
      o.eval_batches = int(number(a, next()));
    else if (a == "--sample")
      o.sample_bytes = int(number(a, next(), 0));
    else if (a == "--threads")
      o.threads = int(number(a, next()));
    else if (a == "--memory-report")
      o.memory_report = true;
    else if (a == "--calibrate")
      o.calibrate = true;
    else if (a == "--cluster")
      o.cluster_file = next();
    else if (a == "--model-file")
      o.model_file = next();
    else if (a == "--global-batch")
      o.global_batch = int(number(a, next()));
    else if (a == "--memory-budget")
      o.memory_budget = bytes_of(a, next());
    else if (a == "--top")
      o.top = int(number(a, next(), 1, 100));
    else if (a == "--bucket-bytes") // DDP's bucket cap, first and later (tests: many buckets)
      o.train.ddp.first_bucket_bytes = o.train.ddp.bucket_bytes =
          std::size_t(number(a, next(), 1, LONG_MAX));
    else if (a == "--checkpoint-every")
      o.checkpoint_every = int(number(a, next()));
    else if (a == "--checkpoint-dir")
      o.checkpoint_dir = next();
    else if (a == "--keep")
      o.keep = int(number(a, next()));
    else if (a == "--resume")
      o.resume = true;
    else if (a == "--quiet")
      o.progress = train::progress_style::none;
    else if (a == "--progress")
      o.progress = progress_of(next());
    else
      usage("unknown option " + std::string(a));
  }
  if (o.dtype != "float" && o.dtype != "double")
    usage("--dtype must be float or double, not '" + o.dtype + "'");
  o.auto_plan = o.plan_text == "auto";
  if (!o.auto_plan) o.train.plan = par::parse_plan(o.plan_text);
  if (micro && o.train.plan.microbatches != 1 && o.train.plan.microbatches != micro)
    usage("--micro " + std::to_string(micro) +
          " and the plan's micro=" + std::to_string(o.train.plan.microbatches) + " differ");
  if (micro) o.train.plan.microbatches = micro;
  o.train.model.check(); // before anything sizes a model from it
  if (o.memory_report && o.controller)
    usage("--memory-report is printed by SPMD runs; with --controller the ranks' memory stays "
          "on the actors");
  if (o.controller &&
      (o.auto_plan || o.calibrate || !o.cluster_file.empty() || !o.model_file.empty()))
    usage("--plan auto, --calibrate, --cluster and --model-file run SPMD (every rank trains); "
          "controller mode takes an explicit --plan");
  if (o.train.optimizer != "adam" && o.train.optimizer != "sgd") // before any calibration
    usage("--optimizer must be adam or sgd, not '" + o.train.optimizer + "'");
  if (o.auto_plan && micro) usage("--plan auto chooses the micro-batches; leave out --micro");
  if (o.controller && o.memory_budget > 0)
    usage("--memory-budget checks SPMD runs; controller mode takes none");
  if (o.global_batch > 0 && !o.auto_plan) { // --batch is per data-parallel rank
    if (o.global_batch % o.train.plan.dp != 0)
      usage("--global-batch " + std::to_string(o.global_batch) +
            " is not a multiple of dp=" + std::to_string(o.train.plan.dp));
    o.train.batch = o.global_batch / o.train.plan.dp;
  }
  return o;
}

/// The bytes of the symmetric heap this model's gradient buckets need, when more than
/// the default: set before the runtime starts, the same on every rank.
void size_heap(const app_options& o) {
  if (std::getenv("CROWN_HEAP_SIZE")) return;
  const std::size_t element = o.dtype == "float" ? 4 : 8;
  const std::size_t need =
      par::param_layout::of(o.train.model).total * element + (std::size_t{64} << 20);
  if (need > (std::size_t{128} << 20))
    ::setenv("CROWN_HEAP_SIZE", (std::to_string((need >> 20) + 1) + "M").c_str(), 1);
}

/// A checkpoint of `t` after step `s` in `dir` (collective over `m`, the trainer's workers).
template <typename T>
void save_checkpoint(const crown::mesh& m, const par::trainer<T>& t, const std::string& dir,
                     int keep, long s) {
  const crown::checkpoint_dir d(m, dir, keep);
  auto w = d.begin(s);
  t.save(w);
  d.commit(w);
}

/// Loads the newest valid checkpoint of `dir` into `t` (collective over `m`); its step, or 0.
template <typename T>
long resume_checkpoint(const crown::mesh& m, par::trainer<T>& t, const std::string& dir, int keep) {
  const auto found = crown::checkpoint_dir(m, dir, keep).newest_valid();
  if (!found) return 0;
  crown::checkpoint_reader r(m, found->path);
  t.load(r);
  return t.steps_done();
}

/// One worker's training, wrapped for the controller: the same trainer SPMD ranks use.
template <typename T>
class trainer_actor {
public:
  explicit trainer_actor(const app_options& o)
      : t_(crown::this_actor().mesh,
           std::make_shared<const par::corpus>(o.data, o.train.model.context), o.train) {}
  /// This worker's loss over its samples (the same on every worker of its data-parallel
  /// rank), divided by the workers: summed along the reply tree (reduce), it is the
  /// global loss.
  double step() { return double(t_.step()) / t_.options().plan.workers(); }
  double evaluate(int batches) { return double(t_.evaluate(batches)); }
  double hidden_fraction() const { return t_.hidden_fraction(); }
  std::string sample(int bytes, std::uint64_t seed) { return t_.sample("\n", bytes, 0.8, seed); }
  /// A checkpoint of every actor's state after step `s` (collective among the actors).
  void save(const std::string& dir, int keep, long s) {
    save_checkpoint(crown::this_actor().mesh, t_, dir, keep, s);
  }
  /// Loads the newest valid checkpoint; returns its step, or 0 when there is none.
  long resume(const std::string& dir, int keep) {
    return resume_checkpoint(crown::this_actor().mesh, t_, dir, keep);
  }
  static constexpr auto endpoints = crown::endpoints(
      &trainer_actor::step, &trainer_actor::evaluate, &trainer_actor::hidden_fraction,
      &trainer_actor::sample, &trainer_actor::save, &trainer_actor::resume);

private:
  par::trainer<T> t_;
};

/// What the loop drives, in either mode.
struct driver {
  std::function<double()> step;                ///< the global loss of the next step
  std::function<double()> evaluate;            ///< the validation loss
  std::function<double()> hidden;              ///< DDP's hidden fraction in the last step
  std::function<void(long)> save;              ///< a checkpoint after step s
  std::function<std::optional<long>()> resume; ///< the step of the checkpoint loaded, if any
  std::function<bool()> stop; ///< a stop signal asked to checkpoint and leave (every rank alike)
};

/// The loop both modes share: resume, step, evaluate now and then, checkpoint, report.
/// `stopped`: the step after which a stop signal made it checkpoint and leave, or 0.
train::report run_steps(const app_options& o, std::size_t tokens_per_step, const driver& d,
                        bool show, long& stopped) {
  stopped = 0;
  train::report rep(o.steps, tokens_per_step, show ? o.progress : train::progress_style::none);
  long first = 1;
  if (o.resume) {
    if (const auto done = d.resume()) {
      first = *done + 1;
      if (show) std::printf("resumed after step %ld from %s\n", *done, o.checkpoint_dir.c_str());
    } else if (show) {
      std::printf("no valid checkpoint in %s: starting at step 1\n", o.checkpoint_dir.c_str());
    }
  }
  rep.start_at(first);
  rep.set_plan(o.train.plan.to_string(), o.predicted_step, o.predicted_memory);
  if (show && !o.csv.empty()) rep.open_csv(o.csv, first);
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  for (long s = first; s <= o.steps; ++s) {
    train::step_record r;
    r.step = s;
    r.loss = d.step();
    const auto now = std::chrono::steady_clock::now();
    r.seconds = std::chrono::duration<double>(now - start).count();
    r.step_seconds = std::chrono::duration<double>(now - last).count();
    r.tokens_per_second = double(tokens_per_step) / r.step_seconds;
    r.hidden_fraction = d.hidden();
    const bool saved = o.checkpoint_every > 0 && s % o.checkpoint_every == 0;
    {
      // An evaluation or a checkpoint may take long: the stop deadline waits meanwhile.
      const crown::stop_signals::deadline_pause hold;
      if (o.eval_every > 0 && (s % o.eval_every == 0 || s == o.steps)) r.eval_loss = d.evaluate();
      if (saved) d.save(s);
    }
    last = std::chrono::steady_clock::now();
    rep.add(r);
    if (s < o.steps && d.stop()) {
      if (!saved) d.save(s);
      stopped = s;
      if (show)
        std::printf("crown-train: %s: checkpointed after step %ld in %s; stopping (exit %d), "
                    "--resume continues\n",
                    crown::stop_signals::received() ? crown::stop_signals::signal_name()
                                                    : "a stop signal on another rank",
                    s, o.checkpoint_dir.c_str(), crown::stop_exit_status);
      break;
    }
  }
  if (stopped == 0) crown::stop_signals::loop_done(); // sampling and output: no deadline
  if (show) rep.finish();
  return rep;
}

/// --memory-report: what the accounting allocator measured on each rank, in rank order.
void print_memory(const crown::mesh& world) {
  const par::memory_ledger m = par::memory_now();
  std::array<char, 512> mine{}; // the longest line (20-digit numbers) is under 300 bytes
  int at = std::snprintf(mine.data(), mine.size(), "memory rank %d:", world.rank());
  for (std::size_t k = 0; k < par::buffer_kinds; ++k)
    at += std::snprintf(mine.data() + at, mine.size() - std::size_t(at), " %s %zu",
                        par::to_string(par::buffer_kind(k)).data(), m.peak[k]);
  std::snprintf(mine.data() + at, mine.size() - std::size_t(at),
                " bytes at peak; model state %zu, all together %zu\n", m.peak_model_state(),
                m.peak_total);
  std::vector<char> all(world.rank() == 0 ? mine.size() * std::size_t(world.size()) : 0);
  MPI_Gather(mine.data(), int(mine.size()), MPI_CHAR, all.data(), int(mine.size()), MPI_CHAR, 0,
             world.comm());
  for (std::size_t r = 0; r < all.size(); r += mine.size()) std::fputs(all.data() + r, stdout);
}

void outputs(const app_options& o, const train::report& rep, const std::string& text,
             const std::string& title) {
  if (!o.plot.empty() && rep.write_plot(o.plot, title)) std::printf("wrote %s\n", o.plot.c_str());
  if (!text.empty()) std::printf("--- sampled text ---\n%s\n--------------------\n", text.c_str());
}

std::string title_of(const app_options& o, bool controller) {
  return "crown-train " + o.train.plan.to_string() + (controller ? " (controller)" : "") + ", " +
         o.train.model.to_string() + ", " + o.dtype;
}

namespace plan = crown::plan;

/// The planner's estimates, as --plan auto lists them.
void print_estimates(const std::vector<plan::estimate>& ranked, double tokens_per_sample) {
  constexpr double gib = 1 << 30;
  std::printf("%-4s %-36s %12s %12s %12s %12s %12s\n", "rank", "plan", "step_s", "tokens/s",
              "state_GiB", "act_GiB", "total_GiB");
  int rank = 0;
  for (const auto& e : ranked)
    std::printf("%-4d %-36s %12.4g %12.4g %12.4f %12.4f %12.4f\n", ++rank,
                plan::to_string(e.plan).c_str(), e.step_seconds,
                e.samples_per_second * tokens_per_sample, e.memory.model_state / gib,
                (e.memory.gathered + e.memory.activations) / gib, e.memory.total() / gib);
}

/// Writes `text` to `path` whole or not at all (a file beside it, renamed), or throws
/// naming the file.
void write_text(const std::string& path, const std::string& text) {
  const std::string part = path + ".part";
  std::FILE* f = std::fopen(part.c_str(), "w");
  bool ok = f && std::fputs(text.c_str(), f) >= 0;
  if (f) ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(part.c_str(), path.c_str()) != 0) {
    std::remove(part.c_str());
    throw crown::argument_error("file '" + path + "'", "cannot be written");
  }
}

/// Names the plan --plan auto chose, before an error of it.
std::string chosen(const app_options& o) {
  if (!o.auto_plan) return {};
  char predicted[32];
  std::snprintf(predicted, sizeof predicted, "%.4g", o.predicted_step);
  return "the plan --plan auto chose (" + o.train.plan.to_string() + ", predicted " + predicted +
         " s per step) failed: ";
}

/// A failure of the plan --plan auto chose on this rank alone: the others may wait for it in
/// a collective, so the job ends, naming the plan and the cause.
[[noreturn]] void abort_naming(crown::runtime& rt, const app_options& o, const std::exception& e) {
  std::fprintf(stderr, "crown-train: rank %d: %s%s\n", rt.rank(), chosen(o).c_str(), e.what());
  std::fflush(stderr);
  MPI_Abort(rt.world().comm(), 1);
  std::abort(); // MPI_Abort does not return
}

/// The text of `path`, read by rank 0 and sent to every rank (hosts need not share a file
/// system); when rank 0 cannot read it, every rank throws its error.
std::string read_on_rank0(const crown::mesh& world, const std::string& path) {
  std::string text, context, problem;
  if (world.rank() == 0) try {
      text = plan::read_file(path);
    } catch (const crown::error& e) {
      context = e.context();
      problem = e.message();
    }
  for (std::string* s : {&text, &context, &problem}) {
    unsigned long n = s->size();
    MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG, 0, world.comm());
    s->resize(n);
    MPI_Bcast(s->data(), int(n), MPI_CHAR, 0, world.comm());
  }
  if (!problem.empty()) throw crown::argument_error(context, problem);
  return text;
}

/// What the planner does before training (--calibrate, --plan auto, --cluster, --model-file,
/// --memory-budget), on every rank alike: files are read by rank 0 and sent to all, every
/// measurement is agreed on (the slowest rank's), and the search is deterministic. Files
/// are read and checked first; calibration measures only what they do not give. Returns the
/// exit status when the run ends here, else nothing, with `o`'s plan, batch and predictions
/// set.
template <typename T>
std::optional<int> plan_first(crown::runtime& rt, app_options& o) {
  const bool times = o.auto_plan || o.calibrate || !o.cluster_file.empty();
  if (!times && o.memory_budget <= 0 && o.model_file.empty()) return std::nullopt;
  const bool show = rt.rank() == 0;
  const int workers = rt.size(), element = int(sizeof(T));
  const auto& config = o.train.model;
  try {
    const auto [hosts, per_host] = train::job_hosts(rt.world(), rt.topology());
    const int global = o.global_batch > 0
                           ? o.global_batch
                           : o.train.batch * (o.auto_plan ? workers : o.train.plan.dp);
    plan::model m = train::planner_model(config, element); // no layer times: memory only
    plan::cluster c; // the job's shape; links and rates only matter to step times
    c.hosts = hosts;
    c.devices_per_host = per_host;
    c.precision = train::precision_of(element);
    c.peak_flops = 1;
    c.memory_bytes = std::numeric_limits<double>::infinity();
    c.intra_host = c.inter_host = {1, 0};
    bool have_cluster = false, have_model = false;
    if (!o.calibrate && !o.cluster_file.empty()) {
      const std::string what = "cluster file '" + o.cluster_file + "'";
      c = plan::parse_cluster(read_on_rank0(rt.world(), o.cluster_file), what);
      train::check_cluster(c, what, hosts, per_host, element);
      have_cluster = true;
    }
    if (!o.calibrate && !o.model_file.empty()) {
      const std::string what = "model file '" + o.model_file + "'";
      m = plan::parse_model(read_on_rank0(rt.world(), o.model_file), what);
      train::check_model(m, what, config, element, o.train.optimizer);
      have_model = true;
    }
    if (times && (!have_cluster || !have_model)) {
      const int micro = std::max(1, global / workers);
      if (show)
        std::printf(
            "crown-train: calibrating %s%s%s of %s on %d ranks (%d host(s)) around %d samples "
            "per layer...\n",
            have_cluster ? "" : "the cluster", have_cluster || have_model ? "" : " and ",
            have_model ? "" : "the layers", config.to_string().c_str(), workers, hosts, micro);
      std::string summary;
      if (!have_cluster)
        c = train::calibrate_cluster<T>(rt.world(), rt.topology(), config, micro, summary);
      if (!have_model)
        m = train::calibrate_layers<T>(rt.world(), config, o.train.optimizer, micro, summary);
      if (show) std::fputs(summary.c_str(), stdout);
    }
    if (o.calibrate) {
      const std::string cluster = o.cluster_file.empty() ? "crown-cluster.json" : o.cluster_file;
      const std::string model = o.model_file.empty() ? "crown-model.json" : o.model_file;
      if (show) {
        write_text(cluster, plan::to_json(c));
        write_text(model, plan::to_json(m));
        std::printf("wrote %s and %s\n", cluster.c_str(), model.c_str());
      }
      return 0;
    }
    // The cluster's memory per rank less this rank's symmetric heap, which the accounting
    // allocator does not see.
    const double budget =
        o.memory_budget > 0 ? o.memory_budget : c.memory_bytes - double(rt.config().heap_size);
    const plan::training t = train::planner_training(global, element, o.train.optimizer, budget);
    plan::estimate e;
    if (o.auto_plan) {
      const plan::search_result r = plan::search(m, c, t, o.top);
      if (r.ranked.empty()) {
        std::string why;
        for (const auto& k : r.infeasible)
          why.append("\n  ")
              .append(plan::to_string({k.kind, {}}, false))
              .append(": ")
              .append(k.reason);
        throw crown::argument_error("--plan auto", "no plan of " + std::to_string(workers) +
                                                       " ranks runs this model within " +
                                                       train::size_text(budget) +
                                                       " per rank:" + why);
      }
      if (show) {
        std::printf("crown-train: the planner's best %zu plans for a global batch of %d:\n",
                    r.ranked.size(), global);
        print_estimates(r.ranked, m.tokens_per_sample);
      }
      e = r.ranked.front();
      o.train.plan = train::to_plan(e.plan);
      o.train.batch = global / o.train.plan.dp;
      o.plan_text = o.train.plan.to_string();
    } else {
      e = train::predict(m, c, t, o.train.plan, config.blocks);
    }
    if (o.memory_budget > 0 && e.memory.total() > o.memory_budget)
      throw crown::argument_error("--memory-budget",
                                  "plan " + o.train.plan.to_string() + " needs " +
                                      train::memory_text(e.memory) +
                                      " per rank by the planner's memory model, over the budget "
                                      "of " +
                                      train::size_text(o.memory_budget));
    o.predicted_memory = e.memory.total();
    o.predicted_step = times ? e.step_seconds : 0;
    if (show) {
      std::printf("crown-train: planned %s: ", o.train.plan.to_string().c_str());
      if (times) std::printf("predicted %.4g s per step, ", e.step_seconds);
      std::printf("%s per rank at most\n", train::memory_text(e.memory).c_str());
    }
  } catch (const crown::error& e) {
    std::fprintf(stderr, "crown-train: %s\n", e.what()); // names the rank
    return 2;
  }
  return std::nullopt;
}

template <typename T>
int spmd(crown::runtime& rt, const app_options& o, std::shared_ptr<const par::corpus> data,
         const crown::stop_signals* stop) {
  std::optional<par::trainer<T>> made;
  try { // what only the ranks' placement decides (HYBRID_SHARD's hosts): every rank alike
    made.emplace(rt.world(), std::move(data), o.train);
  } catch (const crown::argument_error& e) {
    std::fprintf(stderr, "crown-train: %s%s\n", chosen(o).c_str(), e.what());
    return 2;
  } catch (const std::exception& e) { // on this rank alone (out of memory): end the job
    if (!o.auto_plan) throw;
    abort_naming(rt, o, e);
  }
  par::trainer<T>& t = *made;
  const bool show = rt.rank() == 0;
  if (show)
    std::printf("crown-train: %s on %d ranks, %zu parameters (%s), %zu tokens per step%s\n",
                o.train.plan.to_string().c_str(), rt.size(),
                par::param_layout::of(o.train.model).total, o.dtype.c_str(), t.tokens_per_step(),
                (t.memory_placement().empty() ? std::string()
                                              : std::string(", ").append(t.memory_placement()))
                    .c_str());
  const driver d{[&] { return double(t.average(t.step())); },
                 [&] { return double(t.evaluate(o.eval_batches)); },
                 [&] { return t.hidden_fraction(); },
                 [&](long s) { save_checkpoint(rt.world(), t, o.checkpoint_dir, o.keep, s); },
                 [&]() -> std::optional<long> {
                   const long done = resume_checkpoint(rt.world(), t, o.checkpoint_dir, o.keep);
                   return done > 0 ? std::optional<long>(done) : std::nullopt;
                 },
                 [&] { return stop && stop->requested(rt.world().comm()); }};
  long stopped = 0;
  std::optional<train::report> done;
  try {
    done.emplace(run_steps(o, t.tokens_per_step(), d, show, stopped));
  } catch (const std::exception& e) {
    if (!o.auto_plan) throw;
    abort_naming(rt, o, e);
  }
  auto& rep = *done;
  if (stopped > 0) return crown::stop_exit_status; // every rank: they agreed
  if (o.memory_report) print_memory(rt.world());
  // Every rank samples: under FSDP the units are gathered collectively.
  const std::string text =
      o.sample_bytes > 0 ? t.sample("\n", o.sample_bytes, 0.8, o.train.seed) : "";
  if (show) outputs(o, rep, text, title_of(o, false));
  return 0;
}

template <typename T>
int controlled(crown::runtime& rt, const app_options& o, const crown::stop_signals* stop) {
  long stopped = 0;
  const int status = rt.control([&](crown::controller& c) {
    const auto& p = o.train.plan;
    auto trainers = c.workers()
                        .reshape({{"pp", p.pp}, {"dp", p.dp}, {"tp", p.tp}})
                        .spawn<trainer_actor<T>>("trainers", o);
    const std::size_t tokens = std::size_t(p.dp) * o.train.batch * o.train.model.context;
    std::printf("crown-train: %s, controller on rank 0 driving %d trainer actors, %zu parameters "
                "(%s), %zu tokens per step\n",
                p.to_string().c_str(), c.workers().mesh().size(),
                par::param_layout::of(o.train.model).total, o.dtype.c_str(), tokens);
    using actor = trainer_actor<T>;
    const driver d{
        [&] { return trainers.reduce(crown::reduce_op::sum, &actor::step).get(); },
        [&] {
          return trainers.reduce(crown::reduce_op::max, &actor::evaluate, o.eval_batches).get();
        },
        [&] {
          return trainers.call_one({0, 0, 0}, &actor::hidden_fraction).get();
        },
        [&](long s) { trainers.call(&actor::save, o.checkpoint_dir, o.keep, s).get(); },
        [&]() -> std::optional<long> {
          const long done =
              trainers.reduce(crown::reduce_op::max, &actor::resume, o.checkpoint_dir, o.keep)
                  .get();
          return done > 0 ? std::optional<long>(done) : std::nullopt;
        },
        // The controller alone decides (its own flag): the actors follow its calls.
        [&] { return stop && crown::stop_signals::received(); }};
    auto rep = run_steps(o, tokens, d, true, stopped);
    if (stopped > 0) return;
    const std::string text =
        o.sample_bytes > 0
            ? trainers.call(&trainer_actor<T>::sample, o.sample_bytes, o.train.seed).get()[0]
            : "";
    outputs(o, rep, text, title_of(o, true));
  });
  MPI_Bcast(&stopped, 1, MPI_LONG, 0, rt.world().comm()); // every rank exits alike
  return status == 0 && stopped > 0 ? crown::stop_exit_status : status;
}

} // namespace

int main(int argc, char** argv) {
  app_options o = [&] {
    try {
      return parse(argc, argv);
    } catch (const crown::error& e) {
      usage(e.message() + " (" + e.context() + ")");
    }
  }();
  size_heap(o);
  // Before the runtime: a stop signal during start-up must not end a run that checkpoints.
  // Controller mode has no deadline: no rank calls requested(), the controller decides.
  std::optional<crown::stop_signals> stop;
  try {
    if (o.checkpoint_every > 0) stop.emplace(!o.controller);
  } catch (const crown::error& e) { // CROWN_STOP_GRACE: every rank reads the same value
    usage(e.message() + " (" + e.context() + ")");
  }
  const crown::stop_signals* stopping = stop ? &*stop : nullptr;
  crown::runtime rt(argc, argv);
  par::nn::set_blas_threads(o.threads);
  std::shared_ptr<const par::corpus> data;
  auto checked = [&] { // every rank checks everything before any work starts, and fails alike
    try {
      const int workers = rt.size() - (o.controller ? 1 : 0);
      par::check_options(o.train, workers);
      data = std::make_shared<const par::corpus>(o.data, o.train.model.context);
      return true;
    } catch (const crown::error& e) {
      std::fprintf(stderr, "crown-train: %s\n", e.what());
      return false;
    }
  };
  // A plan given is checked before planning; the one --plan auto chooses, after.
  if (!o.auto_plan && !o.calibrate && !checked()) return 2;
  if (!o.controller)
    if (const auto done =
            o.dtype == "double" ? plan_first<double>(rt, o) : plan_first<float>(rt, o))
      return *done;
  if (o.auto_plan && !checked()) return 2;
  if (o.controller) {
    if (rt.rank() != 0) data.reset(); // actors read their own copy
    return o.dtype == "double" ? controlled<double>(rt, o, stopping)
                               : controlled<float>(rt, o, stopping);
  }
  return o.dtype == "double" ? spmd<double>(rt, o, data, stopping)
                             : spmd<float>(rt, o, data, stopping);
}
