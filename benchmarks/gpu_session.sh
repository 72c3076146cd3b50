#!/usr/bin/env bash
# Every GPU measurement of docs/benchmarks.md ("On a GPU") in one run, for a GPU machine that is
# lent for a few minutes: each stage has its own time cap, so one stage that hangs or fails costs
# only its cap. Everything is written under $WORK (default runs/gpu-session); the logs, the
# summary and every small result (no weights) are packed after each stage into
# $OUT/gpu-session.tar.gz ($OUT defaults to $WORK).
#
#   bash benchmarks/gpu_session.sh            # from the repository's root, on the GPU machine
#
# Stages (their caps add up to under 10 minutes):
#   facts     the GPU, torch and CUDA; the measured bf16 matrix-product rate and copy bandwidth
#   tests     pytest -m cuda (fused attention and its kernels, caches, decoding, training, resume,
#             HF parity and torchrun on the GPU), and beside it the rest of the suite
#   bible     a base-size model trained on the Bible for QUALITY_MINUTES (configs/gpu-bible-base.toml), then its test BLEU
#   speed     training throughput and MFU of base and big on synthetic batches; a profile; HF Marian
#   decode    greedy and beam-4 on the Bible test split against Hugging Face generate, on a model
#             of Marian's layout that it trains for 60 s first (the Bible run's pre-norm does not export)
#   compile   the base model's throughput through torch.compile (train.compile)
#   cuda      the cuda tests alone (not in the default list: "tests" runs them beside the suite)
#   images    an image generator's samples at several guidance scales (benchmarks/image_guidance.py)
#             and its bits/dim on all of --images; needs runs/fashion-mnist-igpt/best,
#             runs/fashion-mnist-vit/best and data/fashion-mnist/test.safetensors (not default)
#   backtranslation   benchmarks/backtranslation.sh with BT_STEPS steps of BT_SET's batches (the
#             data of configs/es-en.toml and data/wiki; not default)
# STAGES picks and orders nothing: stages run in this file's order, those named in STAGES only.
# BIBLE_SET adds --set flags to the Bible run; DEADLINE=N shortens every cap to end N seconds
# after the start.
set -u
cd "$(dirname "$0")/.."
WORK=${WORK:-runs/gpu-session}
OUT=${OUT:-$WORK}
QUALITY_MINUTES=${QUALITY_MINUTES:-1.5}
STAGES=${STAGES:-facts tests bible speed decode compile}
mkdir -p "$WORK/logs" "$WORK/runs" "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python3}
began=$(date +%s)

stage() {  # stage NAME CAP COMMAND...: run with a cap, log it, note how it ended
    local name=$1 cap=$2
    shift 2
    case " $STAGES " in *" $name "*) ;; *) return ;; esac
    local t0=$(date +%s)
    if [ -n "${DEADLINE:-}" ]; then  # DEADLINE=N: every stage ends by N seconds after the start
        local left=$((DEADLINE - (t0 - began)))
        [ "$left" -lt 15 ] && { echo "== $name: skipped (DEADLINE)" | tee -a "$WORK/summary.txt"; return; }
        [ "$left" -lt "$cap" ] && cap=$left
    fi
    echo "== $name (cap ${cap}s) at +$((t0 - began))s: $*" | tee -a "$WORK/summary.txt"
    timeout -k 5 "$cap" "$@" >"$WORK/logs/$name.log" 2>&1
    local rc=$?
    echo "== $name: exit $rc after $(($(date +%s) - t0))s" | tee -a "$WORK/summary.txt"
    tail -n 25 "$WORK/logs/$name.log"
    pack
}

pack() {  # the logs and every small result (no weights) in one file
    local tarball=$(realpath "$OUT")/gpu-session.tar.gz
    (cd "$WORK" && find summary.txt logs runs -type f \( -name '*.log' -o -name '*.json' \
        -o -name '*.jsonl' -o -name '*.toml' -o -name '*.txt' \) -size -4M -print0 |
        tar -czf "$tarball.tmp" --null -T - && mv "$tarball.tmp" "$tarball")
}

SMOKE=${SMOKE:+--smoke}  # SMOKE=1: the benchmarks' tiny modes, to try this script on a CPU
R=$WORK/runs
stage facts 25 bash -c "nvidia-smi; $PY -c 'import torch; print(torch.__version__, torch.version.cuda)'; \
    $PY benchmarks/gpu_train.py --facts $SMOKE --json $R/facts.json"
# the cuda tests and the rest of the suite side by side: nothing here is timed
stage tests 90 bash -c "$PY -m pytest -m cuda tests/cuda -q -s -rs -p no:cacheprovider >$WORK/logs/cuda.log 2>&1 & \
    $PY -m pytest -q -rf -n 12 -m 'not cuda' -p no:cacheprovider --continue-on-collection-errors tests; wait"
stage cuda 200 $PY -m pytest -m cuda tests/cuda -q -s -rs -p no:cacheprovider  # the cuda tests alone
stage bible 150 bash -c "$PY -m transformer train configs/gpu-bible-base.toml --out $R/bible \
    --set train.max_minutes=$QUALITY_MINUTES ${BIBLE_SET:-} && $PY -m transformer evaluate $R/bible/last \
    --src data/bible/test.spa --ref data/bible/test.eng --output $R/bible/test.out"
stage speed 110 $PY benchmarks/gpu_train.py --model base big --precision bf16 ${SPEED_FLAGS---peer base} \
    --profile base $SMOKE --json "$R/speed.json"
stage decode 150 $PY benchmarks/gpu_decode.py --train-seconds 60 --src data/bible/test.spa \
    --ref data/bible/test.eng --lines 256 --batch1-lines 16 --cell-seconds 4 --max-seconds 75 \
    --work "$R/decode" $SMOKE --json "$R/decode.json"
stage compile 60 $PY benchmarks/gpu_train.py --model ${COMPILE_MODELS:-base} --precision bf16 --compile $SMOKE \
    --json "$R/compile.json"
stage images 150 bash -c "$PY benchmarks/image_guidance.py runs/fashion-mnist-igpt/best \
    --classifier runs/fashion-mnist-vit/best --real data/fashion-mnist/test.safetensors \
    --scales ${GUIDANCE_SCALES:-1 1.5 2 3} --samples 100 --seed 1 --json $R/image-guidance.json && \
    $PY -m transformer evaluate runs/fashion-mnist-igpt/best --images data/fashion-mnist/test.safetensors"
stage backtranslation 420 env WORK="$R/backtranslation" STEPS="${BT_STEPS:-1500}" \
    SET="${BT_SET:---set train.batch_tokens=6144}" VARIANTS="${BT_VARIANTS:-base tagged}" \
    bash benchmarks/backtranslation.sh
echo "== done after $(($(date +%s) - began))s" | tee -a "$WORK/summary.txt"
pack
