#!/bin/bash
# usage: bin/e2e27/call2.sh — end to end at 64K and 128K causal on the H200: cuDNN SDPA, our dense, every method at its default (and s2o at tau 0.002 at 128K)
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.txt
timeout 60 python3 gpu_e2e_peers.py --n 65536,131072 --rep-ms 200 > $OUT/peers.jsonl; echo "peers rc $?"
M=dense,s2o,sparge,unisparse,xattn,flexprefill,minference,psa,window
timeout 200 ./sparseattn e2e --n 65536 --causal true --sweep=false --repeat 3 --warmup 1 --methods $M > $OUT/ours_64k.jsonl; echo "64k rc $?"
timeout 240 ./sparseattn e2e --n 131072 --causal true --sweep=false --repeat 3 --warmup 1 --methods $M > $OUT/ours_128k.jsonl; echo "128k rc $?"
timeout 80 ./sparseattn e2e --n 131072 --causal true --sweep=false --repeat 3 --warmup 1 --methods s2o --s2o-tau 0.002 > $OUT/ours_128k_tau.jsonl; echo "128k tau rc $?"
python3 - <<'PY'
import json,os
o=os.environ['OUT']
for f in ['peers.jsonl','ours_64k.jsonl','ours_128k.jsonl','ours_128k_tau.jsonl']:
    for l in open(os.path.join(o,f)):
        try: r=json.loads(l)
        except Exception: continue
        if 'impl' in r: print(f, r['impl'], r['n'], r['causal'], round(r['ms'],3)); continue
        print(f, r.get('method'), r.get('knob'), r.get('n'), 's=%.3f rel=%.4f plan=%.3f run=%.3f total=%.3f share=%.3f' % (r.get('sparsity',0), r.get('rel_l1',0), r.get('plan_ms',0), r.get('run_ms',0), r.get('total_ms',0), r.get('plan_share',0)))
PY
