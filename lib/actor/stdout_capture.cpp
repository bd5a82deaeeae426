// A serving rank's stdout, redirected to an in-memory file (lib/actor/stdout_capture.hpp).
#include "stdout_capture.hpp"
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <crown/error.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
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

// The capture a dying process rescues (one at a time: one server per process).
std::atomic<stdout_capture*> g_active{nullptr};
constexpr int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM};
struct sigaction g_previous[std::size(fatal_signals)];

void rescue_active() noexcept {
  if (stdout_capture* c = g_active.exchange(nullptr)) c->rescue();
}

void on_fatal_signal(int sig) {
  for (std::size_t i = 0; i < std::size(fatal_signals); ++i)
    if (fatal_signals[i] == SIGTERM && sig == SIGTERM && !(g_previous[i].sa_flags & SA_SIGINFO) &&
        g_previous[i].sa_handler != SIG_DFL && g_previous[i].sa_handler != SIG_IGN) {
      // SIGTERM that the process survives (crown::stop_signals: checkpoint and leave): not a
      // death, so nothing to rescue; the handler it replaced takes it, and this one stays.
      g_previous[i].sa_handler(sig);
      return;
    }
  rescue_active();
  for (std::size_t i = 0; i < std::size(fatal_signals); ++i)
    if (fatal_signals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
  raise(sig); // delivered, to the previous handler, once this one returns
}

void install_rescue(stdout_capture* c) {
  static const bool at_exit = std::atexit(&rescue_active) == 0; // exit() runs it once
  (void)at_exit;
  struct sigaction a {};
  a.sa_handler = &on_fatal_signal;
  sigemptyset(&a.sa_mask);
  for (std::size_t i = 0; i < std::size(fatal_signals); ++i)
    sigaction(fatal_signals[i], &a, &g_previous[i]);
  g_active = c;
}

void uninstall_rescue() {
  g_active = nullptr;
  for (std::size_t i = 0; i < std::size(fatal_signals); ++i)
    sigaction(fatal_signals[i], &g_previous[i], nullptr);
}

/// write() of all of [data, data + n), as far as the descriptor takes it.
void write_all(int fd, const char* data, std::size_t n) noexcept {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w <= 0) return;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
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
  install_rescue(this);
}

void stdout_capture::set_label(std::string_view label) noexcept {
  const std::size_t n = std::min(label.size(), sizeof label_ - 1);
  std::memcpy(label_, label.data(), n);
  label_[n] = '\0';
}

void stdout_capture::rescue() noexcept {
  if (ftrylockfile(stdout) == 0) { // a crash inside stdio would deadlock a plain fflush
    fflush_unlocked(stdout);
    funlockfile(stdout);
  }
  const std::size_t label = std::strlen(label_);
  bool line_start = true;
  const auto emit = [&](const char* data, std::size_t n) {
    for (std::size_t i = 0; i < n;) {
      if (line_start && label) {
        write_all(saved_, label_, label);
        write_all(saved_, " ", 1);
      }
      const void* nl = std::memchr(data + i, '\n', n - i);
      const std::size_t end =
          nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - data) + 1 : n;
      write_all(saved_, data + i, end - i);
      line_start = nl != nullptr;
      i = end;
    }
  };
  emit(partial_.data(), partial_.size());
  char buffer[4096];
  for (off_t at = 0;;) {
    const ssize_t n = pread(memory_, buffer, sizeof buffer, at);
    if (n <= 0) break;
    emit(buffer, static_cast<std::size_t>(n));
    at += n;
  }
  if (!line_start) write_all(saved_, "\n", 1);
  partial_.clear();
  if (ftruncate(memory_, 0) != 0) return; // nothing more to do either way
}

stdout_capture::~stdout_capture() {
  uninstall_rescue();
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
