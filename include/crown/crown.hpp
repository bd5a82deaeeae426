// include/crown/crown.hpp — umbrella header: everything a Crown program uses.
#pragma once
#include <crown/actor.hpp>
#include <crown/build_config.hpp>
#include <crown/coarray.hpp>
#include <crown/collectives.hpp>
#include <crown/completion.hpp>
#include <crown/config.hpp>
#include <crown/error.hpp>
#include <crown/event.hpp>
#include <crown/global_ptr.hpp>
#include <crown/lock.hpp>
#include <crown/log.hpp>
#include <crown/mesh.hpp>
#include <crown/runtime.hpp>
#include <crown/sync.hpp>
#include <crown/tensor.hpp>
#include <crown/topology.hpp>
