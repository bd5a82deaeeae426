// include/crown/tensor.hpp — distributed tensors: a global N-d array over a mesh.
#pragma once
#include <crown/tensor/dist_tensor.hpp>
#include <crown/tensor/layout.hpp>
