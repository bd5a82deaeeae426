// Exception hierarchy: every message carries the kind, the rank and the context.
#include "runtime_state.hpp"
#include <crown/error.hpp>
#include <mpi.h>

namespace crown {
namespace {

std::string compose(std::string_view kind, int rank, const std::string& context,
                    const std::string& message) {
  std::string s(kind);
  s += ": rank ";
  s += rank >= 0 ? std::to_string(rank) : std::string("?");
  if (!context.empty()) s += ": " + context;
  return s + ": " + message;
}

std::string mpi_message(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

int mpi_class(int code) {
  int cls = code;
  MPI_Error_class(code, &cls);
  return cls;
}

std::string failure_list(const std::vector<actor_failure>& failures) {
  std::string s =
      std::to_string(failures.size()) + (failures.size() == 1 ? " actor" : " actors") + " failed";
  for (const actor_failure& f : failures) {
    s += "; ";
    s += f.mesh;
    s += " on rank ";
    s += std::to_string(f.rank);
    s += ": ";
    s += f.type;
    s += ": ";
    s += f.message;
  }
  return s;
}

} // namespace

error::error(std::string context, std::string message)
    : error("crown::error", std::move(context), std::move(message)) {}

error::error(std::string_view kind, std::string context, std::string message)
    : std::runtime_error(compose(kind, detail::current_rank(), context, message)),
      rank_(detail::current_rank()), context_(std::move(context)), message_(std::move(message)) {}

argument_error::argument_error(std::string context, std::string message)
    : error("crown::argument_error", std::move(context), std::move(message)) {}
state_error::state_error(std::string context, std::string message)
    : error("crown::state_error", std::move(context), std::move(message)) {}
config_error::config_error(std::string context, std::string message)
    : error("crown::config_error", std::move(context), std::move(message)) {}
resource_error::resource_error(std::string context, std::string message)
    : error("crown::resource_error", std::move(context), std::move(message)) {}
topology_error::topology_error(std::string context, std::string message)
    : error("crown::topology_error", std::move(context), std::move(message)) {}
mpi_error::mpi_error(std::string context, int code)
    : error("crown::mpi_error", std::move(context), mpi_message(code)), code_(code),
      class_(mpi_class(code)) {}

actor_error::actor_error(std::string context, std::vector<actor_failure> failures)
    : error("crown::actor_error", std::move(context), failure_list(failures)),
      failures_(std::move(failures)) {}
timeout_error::timeout_error(std::string context, std::string message)
    : error("crown::timeout_error", std::move(context), std::move(message)) {}

void check_mpi(int rc, std::string_view what) {
  if (rc != MPI_SUCCESS) throw mpi_error(std::string(what), rc);
}

} // namespace crown
