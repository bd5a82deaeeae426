// lib/checkpoint/hdf5_handle.hpp — RAII for HDF5 identifiers and the text of HDF5's
// error stack (HDF5's own printing is switched off: Crown's errors name the file,
// dataset and field instead).
#pragma once
#include <hdf5.h>
#include <string>
#include <utility>

namespace crown::detail {

/// One HDF5 identifier, closed by its close function when it goes.
class h5_handle {
public:
  using closer = herr_t (*)(hid_t);
  h5_handle() = default;
  h5_handle(hid_t id, closer close) noexcept : id_(id), close_(close) {}
  h5_handle(h5_handle&& o) noexcept
      : id_(std::exchange(o.id_, H5I_INVALID_HID)), close_(o.close_) {}
  h5_handle& operator=(h5_handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      close_ = o.close_;
    }
    return *this;
  }
  h5_handle(const h5_handle&) = delete;
  h5_handle& operator=(const h5_handle&) = delete;
  ~h5_handle() { reset(); }

  [[nodiscard]] hid_t get() const noexcept { return id_; }
  [[nodiscard]] explicit operator bool() const noexcept { return id_ >= 0; }
  /// Closes now; returns false when the close failed (for files: the data may be lost).
  bool reset() noexcept {
    if (id_ < 0) return true;
    const herr_t rc = close_(std::exchange(id_, H5I_INVALID_HID));
    return rc >= 0;
  }

private:
  hid_t id_ = H5I_INVALID_HID;
  closer close_ = nullptr;
};

/// The innermost messages of the calling thread's HDF5 error stack ("" when empty).
inline std::string h5_message() {
  std::string text;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
        auto& t = *static_cast<std::string*>(out);
        if (e->desc && *e->desc) t = t.empty() ? e->desc : t + "; " + e->desc;
        return 0;
      },
      &text);
  H5Eclear2(H5E_DEFAULT);
  return text;
}

} // namespace crown::detail
