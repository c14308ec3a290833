#!/usr/bin/env bash
# PSA and S2O on the GPU, in one run: the device self-test, both methods
# end to end (planned and run on the device, tensors resident) next to our
# dense kernel and cuDNN SDPA, and the PSA authors' public Triton kernel
# (psa_peer.py) where its package is given.
#
# usage: scripts/gpu_psa_s2o.sh BIN_DIR OUT_DIR [E2E_FLAGS ...]   (on the GPU machine)
#   BIN_DIR holds a CGO_ENABLED=0 build of ./cmd/sparseattn named sparseattn,
#   this directory's gpu_e2e_peers.py and psa_peer.py, and optionally
#   psa_triton/ (the src/psa_triton package of ziplab/Pyramid-Sparse-Attention).
#   NS overrides the lengths (default 16384,32768); SELFTEST=0 skips the
#   self-test, SELFTEST_S bounds it (seconds, default 300); any other
#   arguments are more e2e runs to make afterwards, as one quoted flag list each.
set -uo pipefail  # no -e: each step runs even when one before it fails
bin=${1:?usage: gpu_psa_s2o.sh BIN_DIR OUT_DIR}
out=${2:?usage: gpu_psa_s2o.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
NS=${NS:-16384,32768}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
if [ "${SELFTEST:-1}" != 0 ]; then
  timeout "${SELFTEST_S:-300}" "$bin/sparseattn" selftest > "$out/selftest.txt" 2>&1 || echo "selftest exit $?" | tee -a "$out/selftest.txt"
  grep -E "PASS|FAIL" "$out/selftest.txt" | tail -8 || true
fi
python3 "$bin/gpu_e2e_peers.py" --n "$NS" | tee "$out/peers.jsonl"
# Each method at its default and its knob sweep (the sparsest setting
# within rel-L1 0.05 timed), then PSA at the PSA authors' default quotas
# (quantile rule: 10% of the blocks at level 1, 5% at 2x, none at 4x, 20%
# at 8x), the budget their public kernel runs below.
"$bin/sparseattn" e2e --n "$NS" --methods dense,psa,s2o --target 0.05 | tee "$out/ours.jsonl"
"$bin/sparseattn" e2e --n "$NS" --methods psa --sweep=false --psa-rule quantile \
  --psa-quantiles 0.10,0.15,0.15,0.35 --psa-scale 1 | tee "$out/ours_psa_quota.jsonl"
if [ -d "$bin/psa_triton" ]; then
  python3 "$bin/psa_peer.py" --psa-path "$bin" --n "$NS" | tee "$out/psa_peer.jsonl" || echo "psa_peer exit $?"
fi
shift 2
i=0
for extra in "$@"; do
  i=$((i + 1))
  # shellcheck disable=SC2086 # each argument is a flag list
  "$bin/sparseattn" e2e $extra | tee "$out/ours_extra$i.jsonl"
done
