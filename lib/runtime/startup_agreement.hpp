// lib/runtime/startup_agreement.hpp — start-up steps that succeed everywhere or fail everywhere.
#pragma once
#include <crown/config.hpp>
#include <exception>
#include <mpi.h>
#include <string>
#include <string_view>

namespace crown::detail {

/// Start-up steps may fail on some ranks only (a bad variable in one rank's
/// environment, one host with too little memory). Every rank learns whether any
/// failed, so that none walks into the next collective alone and hangs: the failing
/// ranks rethrow their own error; the others throw a config_error with the first
/// failing rank's variable and message ("on rank R: ...") when that was one, else a
/// state_error naming that rank. Collective over `world`.
void agree(MPI_Comm world, const std::exception_ptr& failure, std::string_view step);

/// Runs `step`, then agree()s on its outcome.
template <typename Step>
void agreed_step(MPI_Comm world, std::string_view name, Step&& step) {
  std::exception_ptr failure;
  try {
    step();
  } catch (...) {
    failure = std::current_exception();
  }
  agree(world, failure, name);
}

/// The value of variable `name` in `c`, spelt canonically (numbers as parsed, so that
/// "1024K" and "1M" agree). Throws std::logic_error for a name it does not know.
[[nodiscard]] std::string canonical_value(const config& c, std::string_view name);

/// Every variable that is not per_rank must have the same value on every rank (the
/// launcher may pass different environments, MPMD jobs run different programs):
/// otherwise a config_error on every rank names the first such variable, rank 0's
/// value and the first rank that differs. Collective over `world`.
void require_same_config(MPI_Comm world, const config& c);

} // namespace crown::detail
