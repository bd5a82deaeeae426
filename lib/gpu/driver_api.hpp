// lib/gpu/driver_api.hpp — the CUDA driver calls of the device heap (virtual memory
// management), looked up through the runtime (cudaGetDriverEntryPointByVersion), so
// that libcrown never links libcuda: it loads on machines without a driver, and only a
// device heap needs one.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <string>

namespace crown::detail {

struct driver_api {
  PFN_cuCtxGetCurrent_v4000 context_get = nullptr;
  PFN_cuCtxSetCurrent_v4000 context_set = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_attribute = nullptr;
  PFN_cuGetErrorString_v6000 error_string = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 export_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 import_handle = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
};

/// The driver's entry points, looked up once; nullptr with `why` set when some are
/// missing (no driver, or one too old for virtual memory management).
const driver_api* driver(std::string* why = nullptr);

/// cuGetErrorString's text for `rc`, or "unknown" without a driver.
std::string driver_error_text(int rc);

} // namespace crown::detail
