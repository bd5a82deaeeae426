// A serving rank's stdout, redirected to an in-memory file (lib/actor/stdout_capture.hpp).
#include "stdout_capture.hpp"
#include <cerrno>
#include <crown/error.hpp>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sys/mman.h>
#include <unistd.h>

namespace crown::detail {
namespace {

void flush_stdout() {
  std::cout.flush();
  std::fflush(stdout);
}

[[noreturn]] void fail(const char* call) {
  throw state_error("CROWN_ACTOR_STDOUT", std::string(call) + " failed: " + std::strerror(errno));
}

} // namespace

stdout_capture::stdout_capture() {
  flush_stdout();
  memory_ = memfd_create("crown-actor-stdout", MFD_CLOEXEC);
  if (memory_ < 0) fail("memfd_create");
  saved_ = dup(STDOUT_FILENO);
  if (saved_ < 0 || dup2(memory_, STDOUT_FILENO) < 0) {
    close(memory_);
    if (saved_ >= 0) close(saved_);
    fail("dup2");
  }
}

stdout_capture::~stdout_capture() {
  try { // what nobody collected is printed where it would have gone
    finish([this](std::string_view text) {
      const std::string line = std::string(text) + "\n";
      if (write(saved_, line.data(), line.size()) < 0) return;
    });
  } catch (...) {}
  dup2(saved_, STDOUT_FILENO);
  close(saved_);
  close(memory_);
}

void stdout_capture::collect(const std::function<void(std::string_view)>& line) {
  flush_stdout();
  const off_t written = lseek(STDOUT_FILENO, 0, SEEK_CUR); // shared with memory_
  if (written <= 0) return;
  const std::size_t before = partial_.size();
  partial_.resize(before + static_cast<std::size_t>(written));
  const ssize_t got =
      pread(memory_, partial_.data() + before, static_cast<std::size_t>(written), 0);
  partial_.resize(before + static_cast<std::size_t>(got > 0 ? got : 0));
  // Empty the file for the next endpoint (stdout's offset goes back to its start).
  if (ftruncate(memory_, 0) != 0 || lseek(STDOUT_FILENO, 0, SEEK_SET) != 0) fail("ftruncate");
  std::size_t start = 0;
  for (std::size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1)
    line(std::string_view(partial_).substr(start, end - start));
  partial_.erase(0, start);
}

void stdout_capture::finish(const std::function<void(std::string_view)>& line) {
  collect(line);
  if (!partial_.empty()) line(partial_);
  partial_.clear();
}

} // namespace crown::detail
