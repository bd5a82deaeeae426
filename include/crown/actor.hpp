// include/crown/actor.hpp — actors driven by a single controller (runtime::control).
#pragma once
#include <crown/actor/controller.hpp>
#include <crown/actor/future.hpp>
#include <crown/actor/port.hpp>
#include <crown/actor/registry.hpp>
#include <crown/actor/value_mesh.hpp>
