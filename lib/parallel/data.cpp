// The training text (include/crown/parallel/data.hpp).
#include <algorithm>
#include <crown/error.hpp>
#include <crown/parallel/data.hpp>
#include <crown/parallel/random.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace crown::parallel {

namespace fs = std::filesystem;

corpus::corpus(const std::string& path, int context) : context_(context) {
  const std::string where = "corpus " + path;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw argument_error(where, "no such file or directory");
  std::vector<fs::path> paths;
  if (fs::is_directory(status)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat")
        paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
  } else {
    paths.push_back(path);
  }
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw argument_error(where, "cannot read " + p.string());
    text_.insert(text_.end(), std::istreambuf_iterator<char>(in), {});
  }
  files_ = paths.size();
  split_ = text_.size() - text_.size() / 10;
  const std::size_t need = std::size_t(context) + 2;
  if (split_ < need || text_.size() - split_ < need)
    throw argument_error(where, std::to_string(text_.size()) + " bytes in " +
                                    std::to_string(files_) + " files; a context of " +
                                    std::to_string(context) + " needs at least " +
                                    std::to_string(10 * need) +
                                    " (90% to train on, 10% to validate, each at least context + "
                                    "2 bytes)");
}

void corpus::window(std::size_t at, std::vector<int>& inputs, std::vector<int>& targets) const {
  for (int t = 0; t < context_; ++t) {
    inputs.push_back(text_[at + std::size_t(t)]);
    targets.push_back(text_[at + std::size_t(t) + 1]);
  }
}

void corpus::training_sample(std::uint64_t seed, std::uint64_t index, std::vector<int>& inputs,
                             std::vector<int>& targets) const {
  const std::size_t positions = split_ - std::size_t(context_); // windows that fit
  window(mix64(mix64(seed) ^ index) % positions, inputs, targets);
}

void corpus::validation_sample(std::uint64_t index, std::vector<int>& inputs,
                               std::vector<int>& targets) const {
  const std::size_t windows = (text_.size() - split_ - 1) / std::size_t(context_);
  window(split_ + (index % windows) * std::size_t(context_), inputs, targets);
}

} // namespace crown::parallel
