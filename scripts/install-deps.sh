#!/usr/bin/env bash
# Installs archc's build and test dependencies from Debian packages (idempotent).
# Usage: scripts/install-deps.sh   (uses sudo when not root)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  antlr4 libantlr4-runtime-dev default-jre-headless
  libonnx-dev libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev googletest
  llvm-14-tools clang-format python3 python3-numpy python3-onnx
  librsvg2-bin util-linux
  chromium

)
# Node.js runs the ONNX Runtime execution tests; a machine may already have a newer one.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all Debian packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
