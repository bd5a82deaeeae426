# Shared by scripts/quickstart, scripts/test and scripts/asan (sourced, not run).
# Installs missing Debian packages, then configures and builds a preset.
set -euo pipefail
CROWN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$CROWN_ROOT" # presets are read from the current directory

# Everything a build, the tests and the demos need. Optional parts (CUDA, NCCL) are
# used when present and never installed here.
CROWN_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev libhwloc-dev hwloc libboost-test-dev libcereal-dev
  libucx-dev ucx-utils libhdf5-openmpi-dev gfortran gfortran-11 clang-format iproute2
  clang libclang-rt-14-dev slurm-wlm munge libpng-dev libcoarrays-openmpi-dev hdf5-tools
  libopenblas-dev fortunes gnuplot-nox rapidjson-dev
)

crown_install_dependencies() {
  local missing=()
  for p in "${CROWN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "crown: all ${#CROWN_PACKAGES[@]} packages present"
    return
  fi
  echo "crown: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

crown_environment() {
  # Open MPI refuses to run as root unless told twice.
  if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  # The CUDA toolkit is optional; find its usual home even when nvcc is not on PATH.
  if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
}

# crown_build PRESET [extra cmake -D options...]
crown_build() {
  local preset=$1
  shift
  cmake -S "$CROWN_ROOT" --preset "$preset" "$@"
  cmake --build --preset "$preset" --parallel "$(nproc)"
}
