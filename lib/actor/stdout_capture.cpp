// A serving rank's stdout, redirected to an in-memory file (lib/actor/stdout_capture.hpp).
#include "stdout_capture.hpp"
#include <cerrno>
#include <crown/error.hpp>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

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
  struct stat st {};
  if (fstat(memory_, &st) != 0) fail("fstat");
  if (st.st_size == 0) return;
  // A fresh file takes stdout's place before the old one is read: what other threads
  // print meanwhile lands in the new file, nothing is lost or overwritten.
  const int fresh = memfd_create("crown-actor-stdout", MFD_CLOEXEC);
  if (fresh < 0) fail("memfd_create");
  if (dup2(fresh, STDOUT_FILENO) < 0) {
    close(fresh);
    fail("dup2");
  }
  const int old = std::exchange(memory_, fresh);
  if (fstat(old, &st) == 0 && st.st_size > 0) {
    const std::size_t before = partial_.size();
    partial_.resize(before + static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < static_cast<std::size_t>(st.st_size)) {
      const ssize_t n = pread(old, partial_.data() + before + got,
                              static_cast<std::size_t>(st.st_size) - got, static_cast<off_t>(got));
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    partial_.resize(before + got);
  }
  close(old);
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
