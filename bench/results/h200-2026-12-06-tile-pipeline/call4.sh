#!/usr/bin/env bash
# Device call 4 (session 2026-12-06): the committed tree once more. (1) sass_diff of the fp16 hd-256
# decode instance as call 3 ran it against the commit (comments and an unused helper removed
# since: the SASS must be identical); (2) the Python GPU suite (tests/python/gpu: the torch
# drop-ins over the changed decode; not run since 2026-12-02); (3) ncu of the committed 4 x 3
# CTA at 2048 tokens (bf16 hd256 16q/4kv batch 1 x 32k, 16 partitions) for where its time goes.
set -uo pipefail
OUT=${OUT:-$PWD/device-out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
L=/tmp/logs4; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv > $L/env.txt 2>&1
bash scripts/sass_diff.sh devrun/dec_call3.cubin devrun/dec_final.cubin > $L/sass-diff.txt 2>&1; echo "sass_diff rc=$?: $(tail -1 $L/sass-diff.txt)"
B=/tmp/bF
( cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DMUH_CUDA_ARCHITECTURES=90 -DMUH_TARGETS="0;75;80;90" \
  && cmake --build $B -j16 --target muh_py_core muh_py_torch_ops muh_cli ) > $L/build.log 2>&1
echo "built rc=$? at $(el) s; $(grep -E 'muh: building muh.ops|torch is not' $L/build.log | head -1)"
ls $B/python/muh/ 2>/dev/null | head; ls $B/python | head
export PYTHONPATH=$B/python PYTHONDONTWRITEBYTECODE=1
timeout 330 python3 -m pytest -q -p no:cacheprovider --durations=5 tests/python/gpu > $L/pytest.log 2>&1
echo "pytest rc=$? at $(el) s: $(tail -1 $L/pytest.log)"
grep -E "^(FAILED|ERROR)" $L/pytest.log | head -20
tar czf "$OUT/logs4.tgz" -C $L .
if [ $(el) -lt 520 ]; then
  timeout 60 ncu --clock-control none -k regex:decode_sm80_tma -s 3 -c 1 --set full --import-source no -o $L/ncu-T \
    $B/muh bench decode --only hd256:1:32768 --kv-layout vllm --splits 16 > $L/ncu-run-T.log 2>&1; echo "ncu rc=$? at $(el) s"
  ncu -i $L/ncu-T.ncu-rep --page details > $L/ncu-details-T.txt 2>&1
  ncu -i $L/ncu-T.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $L/ncu-sass-T.csv.gz
  grep -E "Duration|Eligible Warps|Warp Cycles Per Issued|Executed Instructions  |Registers Per" $L/ncu-details-T.txt | head -6
  rm -f $L/ncu-T.ncu-rep
fi
tar czf "$OUT/logs4.tgz" -C $L .
echo "total $(el) s"
