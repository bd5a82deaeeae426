// include/crown/parallel/data.hpp — the training text: bytes read from files, split into
// training and validation parts, and samples drawn by index so that any rank can compute
// any sample (the same sample order for every plan and rank count).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crown::parallel {

class corpus {
public:
  /// Reads `path`: a file, or every regular file of a directory in name order, leaving out
  /// symbolic links and fortune's binary `.dat` indexes. Throws argument_error naming the
  /// path when it is missing, unreadable or holds fewer than `context + 2` bytes for each
  /// part (90% training, the last 10% validation).
  corpus(const std::string& path, int context);
  [[nodiscard]] std::size_t size() const noexcept { return text_.size(); }
  [[nodiscard]] std::size_t files() const noexcept { return files_; }
  [[nodiscard]] std::span<const unsigned char> text() const noexcept { return text_; }

  /// Sample `index` (0, 1, 2, ... over the whole run) of the training part: `context`
  /// input bytes at a position drawn from (seed, index), and the next byte after each as
  /// its target. Appends to inputs and targets.
  void training_sample(std::uint64_t seed, std::uint64_t index, std::vector<int>& inputs,
                       std::vector<int>& targets) const;
  /// Validation window `index` (windows tile the validation part, wrapping around).
  void validation_sample(std::uint64_t index, std::vector<int>& inputs,
                         std::vector<int>& targets) const;

private:
  void window(std::size_t at, std::vector<int>& inputs, std::vector<int>& targets) const;
  std::vector<unsigned char> text_;
  std::size_t split_ = 0, files_ = 0;
  int context_;
};

} // namespace crown::parallel
