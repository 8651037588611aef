# Sourced by the scripts in scripts/gpu/ on the GPU machine: the repository root as the
# working directory, $OUT, unbuffered Python, pydantic from the carried wheels (it is not
# on the GPU image) and remap-ab installed in the venv (editable, no dependencies).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir .whl/*.whl >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
python3 -c 'import torch, triton, pydantic; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
