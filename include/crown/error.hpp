// include/crown/error.hpp — the one exception hierarchy of Crown.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace crown {

/// Base of every exception Crown throws. what() reads
/// "<kind>: rank <r>: <context>: <message>", where r is the calling rank in the
/// runtime's world (or '?' before a runtime exists).
class error : public std::runtime_error {
public:
  error(std::string context, std::string message);
  [[nodiscard]] int rank() const noexcept { return rank_; } ///< -1 when unknown
  [[nodiscard]] const std::string& context() const noexcept { return context_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

protected:
  error(std::string_view kind, std::string context, std::string message);

private:
  int rank_;
  std::string context_;
  std::string message_;
};

/// A caller passed a value that cannot work: unknown dimension, index out of range, ...
class argument_error : public error {
public:
  argument_error(std::string context, std::string message);
};

/// An operation at the wrong time: double initialisation, use after finalize,
/// a feature that needs a thread level or transport the job does not have.
class state_error : public error {
public:
  state_error(std::string context, std::string message);
};

/// A CROWN_* environment variable (or option) holds a value Crown cannot use.
class config_error : public error {
public:
  config_error(std::string context, std::string message);
};

/// A request no heap or buffer can satisfy: a symmetric heap too full for an
/// allocation, or a size that cannot exist (element count x element size beyond 64 bits
/// or beyond the heap). Nothing was allocated or written.
class resource_error : public error {
public:
  resource_error(std::string context, std::string message);
};

/// hwloc could not discover or apply the requested topology or binding.
class topology_error : public error {
public:
  topology_error(std::string context, std::string message);
};

/// An MPI call on one of Crown's communicators returned an error
/// (Crown sets MPI_ERRORS_RETURN on every communicator it creates).
class mpi_error : public error {
public:
  mpi_error(std::string context, int code);
  [[nodiscard]] int code() const noexcept { return code_; }
  [[nodiscard]] int error_class() const noexcept { return class_; } ///< MPI_ERR_* class

private:
  int code_;
  int class_;
};

/// One actor's failure: which actor mesh and point, on which rank, and the exception.
struct actor_failure {
  std::string mesh;    ///< actor mesh name and point, e.g. "trainers{dp=1,tp=0}"
  int rank = -1;       ///< world rank that hosted the actor
  std::string type;    ///< the exception's type, demangled
  std::string message; ///< its what()
  template <class Archive>
  void serialize(Archive& ar) {
    ar(mesh, rank, type, message);
  }
};

/// Raised at the controller when actors failed: lists every failed point.
class actor_error : public error {
public:
  actor_error(std::string context, std::vector<actor_failure> failures);
  [[nodiscard]] const std::vector<actor_failure>& failures() const noexcept { return failures_; }

private:
  std::vector<actor_failure> failures_;
};

/// A wait with a deadline ran out (future::get(timeout)).
class timeout_error : public error {
public:
  timeout_error(std::string context, std::string message);
};

/// Throws mpi_error naming `what` when `rc` is not MPI_SUCCESS. For users who call
/// MPI directly on a mesh's communicator, which returns errors rather than aborting.
void check_mpi(int rc, std::string_view what);

} // namespace crown
