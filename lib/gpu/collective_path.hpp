// lib/gpu/collective_path.hpp — which path the collectives of device coarrays take on a
// mesh: the decision alone, from facts every member agreed on (no CUDA here: it is
// tested in every build).
#pragma once
#include <crown/config.hpp>
#include <crown/detail/device_collectives.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace crown::detail {

/// What the choice depends on, the same on every member.
struct device_path_facts {
  int images = 1;
  /// The first image whose device heap is not mapped by every member (it lies on
  /// another host), or -1 when all are.
  int unmapped_image = -1;
  /// Two images on one GPU (the lowest such pair), or -1: NCCL refuses that.
  int shared_gpu_images[2] = {-1, -1};
  bool nccl_built = false;
  gpu_collectives_choice setting = gpu_collectives_choice::automatic;
};

struct device_path_choice {
  device_path path = device_path::host;
  std::string why; ///< one line for crown-info and the tests' output
};

/// auto: NCCL where every image has a GPU of its own (and NCCL was built in), else
/// Crown's kernels over the peer mappings where every image is mapped here, else the
/// host path. A forced setting that cannot work throws state_error naming
/// CROWN_GPU_COLLECTIVES and the images that stop it.
device_path_choice choose_device_path(const device_path_facts& f);

/// "co_sum of a device coarray on mesh{...}": what errors of `c` name.
std::string device_collective_what(const device_collective& c);

/// With CROWN_CHECK=1 first checks (collective then) that every member passed the same
/// collective, reduction, coarray (block offset), count, element type, image and
/// result count, throwing the same argument_error on every image; then returns what is
/// wrong with `c`'s arguments on this image (naming the values), or empty. Both builds
/// ask it before anything else, so that a bad argument reads the same with or without
/// a GPU; with one, the answer is agreed before anyone waits.
std::string device_collective_problem(const device_collective& c);

/// The lowest pair of images whose GPUs are the same (`gpus[i]`: a GPU UUID
/// per image), or {-1, -1}.
std::pair<int, int> first_shared_gpu(const std::vector<std::string>& gpus);

} // namespace crown::detail
