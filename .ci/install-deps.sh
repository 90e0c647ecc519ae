#!/usr/bin/env bash
# Installs rpsim's Debian dependencies that are missing. As root it runs
# apt-get; otherwise it prints the exact apt-get line and stops.
set -euo pipefail

packages=(
  cmake ninja-build g++ make git pkg-config
  libeigen3-dev libboost-dev libfmt-dev catch2 libmpfr-dev libcli11-dev
  nlohmann-json3-dev libbenchmark-dev zlib1g-dev
  clang libclang-rt-14-dev libomp-14-dev clang-format
  openmpi-bin libopenmpi-dev
  dataset-fashion-mnist fortunes
  python3-matplotlib python3-pandas jupyter-nbconvert python3-ipykernel
  python3-dev python3-numpy pybind11-dev python3-pybind11 python3-pytest python3-hypothesis
  python3-torch python3-torchvision
  libopenblas0-pthread
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} Debian packages present"
  exit 0
fi

line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages; run as root:" >&2
  echo "  apt-get update && $line" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
