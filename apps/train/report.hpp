// apps/train/report.hpp — what crown-train shows a person: a progress bar on a terminal
// (plain lines otherwise), the loss curve as CSV, and a PNG plot of it drawn by gnuplot.
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace train {

struct step_record {
  long step = 0;
  double loss = 0;
  double eval_loss = -1;   ///< < 0: not evaluated at this step
  double seconds = 0;      ///< since training started
  double step_seconds = 0; ///< of this step alone (no evaluation or checkpoint)
  double tokens_per_second = 0;
  double hidden_fraction = 0; ///< of DDP's all-reduce, behind backward
};

/// How progress is shown: a bar redrawn in place, a plain line every few steps, or nothing.
/// `automatic` draws the bar only when standard output is a terminal with a TERM (under
/// mpirun a rank's output is always a pseudo-terminal, even when mpirun's goes to a file).
enum class progress_style { automatic, bar, lines, none };

class report {
public:
  report(long steps, std::size_t tokens_per_step, progress_style style);
  /// Shows step `r` (a bar redrawn in place on a terminal, a line every few steps otherwise).
  void add(const step_record& r);
  void finish();
  [[nodiscard]] const std::vector<step_record>& records() const noexcept { return records_; }
  /// Writes every step to `path` as CSV as it comes (losses with 17 significant digits:
  /// tests compare them), so a killed run leaves its curve; each line also names the step's
  /// own seconds, the plan and the planner's predictions (empty when none). A run that resumes at
  /// step `first` keeps the earlier run's lines before it: the file holds the whole curve.
  void open_csv(const std::string& path, long first);
  /// The plan every CSV line names, and what the planner predicted of its step time and
  /// memory per rank (0: no prediction made). Before open_csv().
  void set_plan(std::string plan, double predicted_step_seconds, double predicted_memory_bytes);
  /// The first step this run makes (after a resume: the one after the checkpoint).
  void start_at(long first) noexcept { first_ = first; }
  /// Plots loss (and validation loss) against step into a PNG with gnuplot; returns false
  /// and says why on stderr when gnuplot is missing or fails.
  bool write_plot(const std::string& path, const std::string& title) const;

private:
  long steps_;
  std::size_t tokens_per_step_;
  bool quiet_, terminal_; // from the style
  long every_;
  long first_ = 1;
  std::string plan_;
  double predicted_step_ = 0, predicted_memory_ = 0;
  std::vector<step_record> records_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv_{nullptr, &std::fclose};
};

} // namespace train
