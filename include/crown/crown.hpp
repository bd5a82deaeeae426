// include/crown/crown.hpp — umbrella header: everything a Crown program uses.
#pragma once
#include <crown/build_config.hpp>
#include <crown/config.hpp>
#include <crown/error.hpp>
#include <crown/log.hpp>
#include <crown/mesh.hpp>
#include <crown/runtime.hpp>
#include <crown/topology.hpp>
