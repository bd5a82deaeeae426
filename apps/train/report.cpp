// What crown-train shows: progress, CSV, plot (apps/train/report.hpp).
#include "report.hpp"
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string_view>
#include <unistd.h>

namespace train {

namespace {
bool on_a_terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) == 1 && term && *term && std::string_view(term) != "dumb";
}
} // namespace

report::report(long steps, std::size_t tokens_per_step, progress_style style)
    : steps_(steps), tokens_per_step_(tokens_per_step), quiet_(style == progress_style::none),
      terminal_(style == progress_style::bar ||
                (style == progress_style::automatic && on_a_terminal())),
      every_(std::max(1L, steps / 20)) {}

namespace {
std::string clock_time(double seconds) {
  const long s = long(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}
} // namespace

void report::add(const step_record& r) {
  records_.push_back(r);
  if (csv_) {
    char eval[32] = "";
    if (r.eval_loss >= 0) std::snprintf(eval, sizeof eval, "%.17g", r.eval_loss);
    char step[32] = "", memory[32] = ""; // empty: not predicted
    if (predicted_step_ > 0) std::snprintf(step, sizeof step, "%.6g", predicted_step_);
    if (predicted_memory_ > 0) std::snprintf(memory, sizeof memory, "%.0f", predicted_memory_);
    std::fprintf(csv_.get(), "%ld,%.17g,%s,%.6f,%.1f,%.3f,%.6f,\"%s\",%s,%s\n", r.step, r.loss,
                 eval, r.seconds, r.tokens_per_second, r.hidden_fraction, r.step_seconds,
                 plan_.c_str(), step, memory);
    std::fflush(csv_.get());
  }
  if (quiet_) return;
  const double eta = r.seconds / double(r.step - first_ + 1) * double(steps_ - r.step);
  char eval[40] = "";
  if (r.eval_loss >= 0) std::snprintf(eval, sizeof eval, " val %.4f", r.eval_loss);
  if (terminal_) {
    constexpr int width = 30;
    const int filled = int(width * r.step / std::max(steps_, 1L));
    std::printf("\r[%s%s] step %ld/%ld loss %.4f%s %.0f tok/s ETA %s ",
                std::string(std::size_t(filled), '#').c_str(),
                std::string(std::size_t(width - filled), '.').c_str(), r.step, steps_, r.loss, eval,
                r.tokens_per_second, clock_time(eta).c_str());
  } else if (r.step % every_ == 0 || r.step == steps_ || r.step == 1 || r.eval_loss >= 0) {
    std::printf("step %ld/%ld loss %.6f%s %.0f tok/s ETA %s\n", r.step, steps_, r.loss, eval,
                r.tokens_per_second, clock_time(eta).c_str());
  }
  std::fflush(stdout);
}

void report::finish() {
  if (terminal_ && !quiet_) std::printf("\n");
  if (records_.empty()) return;
  const auto& last = records_.back();
  std::printf("trained %zu steps (to step %ld) in %.2f s: %.0f tokens/s (evaluations and "
              "checkpoints included), final loss %.6f\n",
              records_.size(), last.step, last.seconds,
              double(tokens_per_step_) * double(records_.size()) / last.seconds, last.loss);
}

void report::set_plan(std::string plan, double predicted_step_seconds,
                      double predicted_memory_bytes) {
  plan_ = std::move(plan);
  predicted_step_ = predicted_step_seconds;
  predicted_memory_ = predicted_memory_bytes;
}

void report::open_csv(const std::string& path, long first) {
  std::vector<std::string> earlier;
  if (first > 1) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line); // the header
    while (std::getline(in, line))
      if (std::strtol(line.c_str(), nullptr, 10) < first) earlier.push_back(line);
  }
  csv_.reset(std::fopen(path.c_str(), "w"));
  if (!csv_) {
    std::fprintf(stderr, "crown-train: cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(csv_.get(), "step,loss,eval_loss,seconds,tokens_per_s,allreduce_hidden,"
                           "step_seconds,plan,predicted_step_seconds,predicted_memory_bytes\n");
  for (const auto& l : earlier) std::fprintf(csv_.get(), "%s\n", l.c_str());
  std::fflush(csv_.get());
}

bool report::write_plot(const std::string& path, const std::string& title) const {
  const std::string data = path + ".dat";
  {
    std::ofstream out(data);
    for (const auto& r : records_)
      out << r.step << ' ' << r.loss << ' ' << (r.eval_loss >= 0 ? r.eval_loss : -1) << '\n';
  }
  const bool any_eval = std::any_of(records_.begin(), records_.end(),
                                    [](const step_record& r) { return r.eval_loss >= 0; });
  std::string script = "set terminal pngcairo size 900,540 noenhanced\nset output '" + path +
                       "'\nset title '" + title +
                       "'\nset xlabel 'step'\nset ylabel 'loss "
                       "(cross-entropy, nats)'\nset grid\nplot '" +
                       data + "' using 1:2 with lines lw 2 title 'training'";
  if (any_eval)
    script += ", '' using 1:($3 >= 0 ? $3 : 1/0) with linespoints pt 7 title 'validation'";
  script += "\n";
  FILE* gp = ::popen("gnuplot 2>&1", "w");
  const bool ok = gp && std::fputs(script.c_str(), gp) >= 0 && ::pclose(gp) == 0;
  std::remove(data.c_str());
  if (!ok)
    std::fprintf(stderr,
                 "crown-train: no plot written to %s: gnuplot (Debian's gnuplot-nox) is "
                 "missing or failed\n",
                 path.c_str());
  return ok;
}

} // namespace train
