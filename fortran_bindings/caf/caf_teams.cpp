// libcrown_caf's teams: FORM TEAM, CHANGE TEAM, END TEAM, SYNC TEAM and TEAM_NUMBER, as
// gfortran 12 emits them (no STAT= on these statements, no team arguments to the
// inquiry functions). A team variable holds a pointer to a team kept until the end.
#include "caf_runtime.hpp"
#include "caf_status.hpp"
#include "caf_sync.hpp"
#include <algorithm>
#include <crown/collectives.hpp>
#include <crown/runtime.hpp>
#include <cstring>
#include <vector>

namespace crown::caf {

team* team_of(void** variable, const char* what) {
  team* t = variable ? static_cast<team*>(*variable) : nullptr;
  if (!t) throw crown::state_error(what, "the team variable was not set by FORM TEAM");
  return t;
}

} // namespace crown::caf

using namespace crown::caf;

extern "C" {

void _gfortran_caf_form_team(int number, void** variable, int new_index) {
  guarded(nullptr, nullptr, 0, [&] {
    team& parent = current_team();
    const crown::mesh& m = parent.images;
    enter_collective(parent, "form team");
    struct request {
      int number, index;
    } const mine{number, new_index};
    const auto all =
        crown::caf_api::co_gather_bytes(m, &mine, sizeof mine, 0x63616603u << 1, -1, "form team");
    std::vector<std::pair<int, int>> members; // (position in the new team, world rank)
    for (int i = 0; i < m.size(); ++i) {
      request r;
      std::memcpy(&r, all.data() + static_cast<std::size_t>(i) * sizeof r, sizeof r);
      if (r.number <= 0) // every image sees it, so every image throws
        throw crown::argument_error("form team", "image " + std::to_string(i + 1) +
                                                     " gave team number " +
                                                     std::to_string(r.number) +
                                                     " (positive "
                                                     "required)");
      if (r.number == number)
        members.emplace_back(r.index ? r.index : i + 1, m.ranks()[static_cast<std::size_t>(i)]);
    }
    std::sort(members.begin(), members.end());
    std::vector<int> ranks;
    int key = 0;
    for (const auto& [position, rank] : members) {
      if (rank == crown::this_runtime().rank()) key = position;
      ranks.push_back(rank);
    }
    auto formed = std::make_unique<team>(
        crown::mesh({crown::dim{"team", static_cast<int>(ranks.size())}}, ranks), number, &parent);
    prepare_team(*formed, &parent, key);
    *variable = keep_team(std::move(formed));
  });
}

void _gfortran_caf_change_team(void** variable, int /*coselectors*/) {
  guarded(nullptr, nullptr, 0, [&] {
    team* t = team_of(variable, "change team");
    if (t->parent != &current_team())
      throw crown::state_error("change team", "the team was not formed in the current team");
    set_current_team(t);
    sync_team(*t, "change team");
  });
}

void _gfortran_caf_end_team(void** /*variable*/) {
  guarded(nullptr, nullptr, 0, [&] {
    team& t = current_team();
    if (!t.parent) throw crown::state_error("end team", "the initial team has no end");
    sync_team(t, "end team");
    set_current_team(t.parent);
  });
}

void _gfortran_caf_sync_team(void** variable, int /*unused*/) {
  guarded(nullptr, nullptr, 0, [&] { sync_team(*team_of(variable, "sync team"), "sync team"); });
}

int _gfortran_caf_team_number(void* value) {
  return value ? static_cast<team*>(value)->number : current_team().number;
}

} // extern "C"
