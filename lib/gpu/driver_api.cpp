// Driver entry points through the CUDA runtime.
#include "driver_api.hpp"
#include <cuda_runtime_api.h>

namespace crown::detail {
namespace {

template <typename F>
bool look_up(const char* name, F& f, std::string& missing) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !p) {
    (void)cudaGetLastError();
    missing += missing.empty() ? name : std::string(", ") + name;
    return false;
  }
  f = reinterpret_cast<F>(p);
  return true;
}

struct loaded {
  driver_api api;
  std::string missing;
  bool complete = false;
};

const loaded& load() {
  static loaded l = [] {
    loaded r;
    auto& a = r.api;
    auto& m = r.missing;
    bool ok = look_up("cuCtxGetCurrent", a.context_get, m);
    ok = look_up("cuCtxSetCurrent", a.context_set, m) && ok;
    ok = look_up("cuDeviceGet", a.device_get, m) && ok;
    ok = look_up("cuDeviceGetAttribute", a.device_attribute, m) && ok;
    ok = look_up("cuGetErrorString", a.error_string, m) && ok;
    ok = look_up("cuMemGetAllocationGranularity", a.granularity, m) && ok;
    ok = look_up("cuMemCreate", a.create, m) && ok;
    ok = look_up("cuMemRelease", a.release, m) && ok;
    ok = look_up("cuMemExportToShareableHandle", a.export_handle, m) && ok;
    ok = look_up("cuMemImportFromShareableHandle", a.import_handle, m) && ok;
    ok = look_up("cuMemAddressReserve", a.reserve, m) && ok;
    ok = look_up("cuMemAddressFree", a.address_free, m) && ok;
    ok = look_up("cuMemMap", a.map, m) && ok;
    ok = look_up("cuMemUnmap", a.unmap, m) && ok;
    ok = look_up("cuMemSetAccess", a.set_access, m) && ok;
    r.complete = ok;
    return r;
  }();
  return l;
}

} // namespace

const driver_api* driver(std::string* why) {
  const loaded& l = load();
  if (!l.complete && why) *why = "the CUDA driver lacks " + l.missing;
  return l.complete ? &l.api : nullptr;
}

std::string driver_error_text(int rc) {
  const loaded& l = load();
  const char* text = nullptr;
  if (l.api.error_string && l.api.error_string(static_cast<CUresult>(rc), &text) == CUDA_SUCCESS &&
      text)
    return text;
  return "unknown";
}

} // namespace crown::detail
