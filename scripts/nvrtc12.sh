#!/usr/bin/env bash
# usage: scripts/nvrtc12.sh DIR [--sass]
#
# Puts Debian trixie's NVRTC 12.4 (and with --sass its cuobjdump, nvdisasm
# and ptxas) under DIR, unpacked from the .deb files without installing
# anything, and prints the exports that point the cuda package at it. The
# machine's own NVRTC (Debian bookworm's 11.8) cannot compile for sm_90a,
# so the warp-specialized kernels (wgmma, setmaxnreg) compile only with
# this one off the GPU machine:
#
#   eval "$(scripts/nvrtc12.sh /tmp/nvrtc12 --sass)"
#   SPARSEATTN_GEN_PTXAS=1 SPARSEATTN_GEN_CUBIN_DIR=/tmp/cubins go test -run TestGenWSPtxas -v ./cuda
#   cuobjdump -sass /tmp/cubins/bf16_d128_q128_k64_m1_s4_gen_ws_gather_stop.cubin
#
# TestGenWSPtxas prints ptxas's registers and spills per kernel; the GPU
# machine's own NVRTC still builds what runs there, so read counts made
# here as close, not equal, to the device's.
set -euo pipefail
dir=${1:?usage: scripts/nvrtc12.sh DIR [--sass]}
sass=${2:-}
mirror=http://deb.debian.org/debian
mkdir -p "$dir"
idx=$(mktemp)
trap 'rm -f "$idx"' EXIT
curl -fsS "$mirror/dists/trixie/non-free/binary-amd64/Packages.xz" | xz -dc > "$idx"
pkgs="libnvrtc12 libnvrtc-builtins12.4"
[ "$sass" = --sass ] && pkgs="$pkgs nvidia-cuda-toolkit"
for p in $pkgs; do
	f=$(awk -v p="$p" '$1 == "Package:" { cur = $2 } cur == p && $1 == "Filename:" { print $2; exit }' "$idx")
	[ -n "$f" ] || { echo "nvrtc12.sh: no package $p in trixie non-free" >&2; exit 1; }
	deb="$dir/$(basename "$f")"
	[ -f "$deb" ] || curl -fsS -o "$deb" "$mirror/$f"
	dpkg-deb -x "$deb" "$dir"
done
lib="$dir/usr/lib/x86_64-linux-gnu"
echo "export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} SPARSEATTN_LIBNVRTC=$lib/libnvrtc.so.12"
[ "$sass" = --sass ] && echo "export PATH=$dir/usr/bin:\$PATH"
exit 0
