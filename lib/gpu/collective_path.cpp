// The path of device collectives: NCCL, Crown's peer kernels, or the host collectives.
#include "collective_path.hpp"
#include "../transport/agreement.hpp"
#include <crown/detail/heap.hpp>
#include <crown/error.hpp>
#include <map>

namespace crown {

std::string_view to_string(device_path p) noexcept {
  switch (p) {
  case device_path::peer:
    return "peer";
  case device_path::nccl:
    return "nccl";
  default:
    return "host";
  }
}

namespace detail {
namespace {

std::string images_text(const device_path_facts& f) {
  return std::to_string(f.images) + (f.images == 1 ? " image" : " images");
}

std::string shared_text(const device_path_facts& f) {
  return "images " + std::to_string(f.shared_gpu_images[0]) + " and " +
         std::to_string(f.shared_gpu_images[1]) + " share one GPU";
}

std::string unmapped_text(const device_path_facts& f) {
  return "image " + std::to_string(f.unmapped_image) +
         "'s device heap is not mapped here (another host)";
}

[[noreturn]] void refuse(std::string_view setting, const std::string& why) {
  throw state_error("CROWN_GPU_COLLECTIVES=" + std::string(setting), why);
}

} // namespace

device_path_choice choose_device_path(const device_path_facts& f) {
  const bool shared = f.shared_gpu_images[0] >= 0;
  const bool mapped = f.unmapped_image < 0;
  switch (f.setting) {
  case gpu_collectives_choice::peer:
    if (!mapped) refuse("peer", unmapped_text(f) + ": the peer path needs every image mapped");
    return {device_path::peer,
            images_text(f) + ", every one mapped here (CROWN_GPU_COLLECTIVES=peer)"};
  case gpu_collectives_choice::nccl:
    if (!f.nccl_built) refuse("nccl", "this Crown was built without NCCL");
    if (shared)
      refuse("nccl", shared_text(f) + ", and NCCL refuses several ranks on one GPU (use peer "
                                      "or host)");
    return {device_path::nccl, images_text(f) + ", one GPU each (CROWN_GPU_COLLECTIVES=nccl)"};
  case gpu_collectives_choice::host:
    return {device_path::host, images_text(f) + ", staged through host memory "
                                                "(CROWN_GPU_COLLECTIVES=host)"};
  default:
    break;
  }
  if (f.nccl_built && !shared && f.images > 1)
    return {device_path::nccl, images_text(f) + ", one GPU each"};
  const std::string no_nccl = f.images == 1 ? "one image"
                              : shared      ? shared_text(f) + " (NCCL refuses that)"
                                            : "built without NCCL";
  if (mapped) return {device_path::peer, images_text(f) + " mapped here; " + no_nccl};
  return {device_path::host, images_text(f) + "; " + unmapped_text(f) + "; " + no_nccl};
}

std::string device_collective_what(const device_collective& c) {
  return std::string(c.name) + " of a device coarray on " + c.team->to_string();
}

std::string device_collective_problem(const device_collective& c) {
  const mesh& m = *c.team;
  // With CROWN_CHECK=1 the agreement first: calls that differ between images (co_sum
  // here, co_max there; another coarray) fail on every image instead of mixing.
  if (check_collectives())
    check_same_arguments(m,
                         {{"collective", static_cast<long long>(c.kind)},
                          {"reduction", static_cast<long long>(c.op)},
                          {"block offset", static_cast<long long>(c.offset)},
                          {"count", static_cast<long long>(c.count)},
                          {"element type", static_cast<long long>(c.type_tag >> 1)},
                          {"image", c.image},
                          {"result count", static_cast<long long>(c.result_count)}},
                         device_collective_what(c));
  const auto n = static_cast<std::size_t>(m.size());
  const auto size_problem = [&](const char* holder, std::size_t holds, std::size_t piece) {
    return std::string(holder) + " holds " + std::to_string(holds) + " elements but needs " +
           std::to_string(n * piece) + " (" + std::to_string(n) + " images x " +
           std::to_string(piece) + ")";
  };
  switch (c.kind) {
  case device_collective_kind::reduce:
  case device_collective_kind::broadcast: {
    const int lowest = c.kind == device_collective_kind::reduce ? -1 : 0;
    if (c.image < lowest || c.image >= m.size())
      return std::string(c.kind == device_collective_kind::reduce ? "result image "
                                                                  : "source image ") +
             std::to_string(c.image) + " is out of range [" + std::to_string(lowest) + ", " +
             std::to_string(m.size()) + ")";
    return {};
  }
  case device_collective_kind::all_gather:
    if (c.result_count != n * c.count) return size_problem("the result", c.result_count, c.count);
    break;
  case device_collective_kind::reduce_scatter:
    if (c.count != n * c.result_count)
      return size_problem("the coarray's block", c.count, c.result_count);
    break;
  }
  if (c.result_count && !c.result)
    return "the result is a null pointer (" + std::to_string(c.result_count) + " elements)";
  return {};
}

std::pair<int, int> first_shared_gpu(const std::vector<std::string>& gpus) {
  std::map<std::string, int> first;
  for (int i = 0; i < static_cast<int>(gpus.size()); ++i) {
    const auto [at, fresh] = first.emplace(gpus[static_cast<std::size_t>(i)], i);
    if (!fresh) return {at->second, i};
  }
  return {-1, -1};
}

} // namespace detail
} // namespace crown
