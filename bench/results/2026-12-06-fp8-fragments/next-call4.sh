#!/usr/bin/env bash
# The next session's second call (carry ["devrun11"]; pack p11 as next-call.sh; ~8 min): the
# seed grid with the 16-SM partition (the BI-V100's SM count), the sm80 agent only, over fp16 and
# e4m3 caches — the cells where one fp8 CTA a SM was 0.37-0.69x the fp16 cache's tokens/s.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs11b; mkdir -p $L; trap 'tar czf $OUT/logs.tgz -C $L .' EXIT
[ -x /tmp/p11/muh ] || tar xJf devrun11/p11.tar.xz -C /tmp
P=/tmp/p11; export LD_LIBRARY_PATH=$P:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader | tee $L/gpu.txt
timeout 540 $P/muh bench decode --grid seed --emulate bi-v100 --no-portable --kv-dtype auto,fp8_e4m3 --out $L/seed \
  > $L/seed.log 2> $L/seed.progress
echo "seed rc $? at $(el) s"; grep -E "16 SMs" $L/seed.progress | cut -c1-150 | tail -32
echo "done at $(el) s"
