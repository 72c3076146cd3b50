#!/usr/bin/env bash
# Every GPU measurement of docs/benchmarks/gpu.md ("On a GPU") in one run, for a GPU machine that is
# lent for a few minutes: each stage has its own time cap, so one stage that hangs or fails costs
# only its cap. Everything is written under $WORK (default runs/gpu-session); the logs, the
# summary and every small result (no weights) are packed after each stage into
# $OUT/gpu-session.tar.gz ($OUT defaults to $WORK), and the summary and the test logs are also
# copied to $OUT as plain files. The one call that runs it, with what to prepare first:
# benchmarks/gpu_call.md.
#
#   DEADLINE=520 bash benchmarks/gpu_session.sh     # from the repository's root, on the GPU machine
#   SMOKE=1 TRANSFORMER_TEST_CUDA_DEVICE=cpu bash benchmarks/gpu_session.sh   # a rehearsal on a CPU
#
# Stages, in the order they run (the default list, by value; caps in seconds):
#   facts   25  the GPU, driver, torch, CUDA, Python and the packages the other stages use
#   speed   80  training throughput and MFU of base and big (synthetic batches, bf16), one cell per
#               lever spec (LEVERS, default: plain fold fold+bf16w; gpu_train.py --levers), the
#               measured matmul rate and copy bandwidth, HF Marian beside base, base profiled
#               before (plain) and after (the last spec)
#   compile 110 big compiled (fold+compile), then base with CUDA graphs (fold+graphs), profiled
#   decode  85  a Marian-layout model trained DECODE_TRAIN seconds, then greedy and beam 4, fp32 and
#               bf16, at batch 16, 1 and all 48 lines at once (DECODE_BATCHES), ours against HF
#   lm      45  SmolLM2-135M's shape (random weights: its 540 MB do not travel) at batch 1 and 32,
#               bf16 and fp32, ours against HF generate (needs $SMOLLM2_SHAPE, see gpu_call.md)
#   bible   130 configs/gpu-bible-base.toml for QUALITY_MINUTES (1.5) through the real loop, then
#               its test BLEU / chrF (beam 4); from its start, the suite runs beside it (below)
#   cuda    ... pytest -m cuda tests/cuda -rA -v -n 4: whatever time is left
#   suite       not a stage of its own: the rest of the suite (-m "not cuda", CUDA hidden, -rA -v,
#               -n SUITE_WORKERS), started with the bible stage on cores of its own (the bible run
#               on cores 0-3), stopped with SIGINT at the deadline so that pytest still prints its
#               summary; its log: $OUT/suite.log
# Not in the default list: tests (the cuda tests and the suite side by side, the old way), images,
# backtranslation (see their lines below). STAGES picks and orders nothing: stages run in this
# file's order, those named in STAGES only. DEADLINE=N shortens every cap to end N seconds after
# the start. SMOKE=1: the benchmarks' tiny modes and a tiny Bible run, to try this on a CPU.
set -u
cd "$(dirname "$0")/.."
WORK=${WORK:-runs/gpu-session}
OUT=${OUT:-$WORK}
QUALITY_MINUTES=${QUALITY_MINUTES:-1.5}
STAGES=${STAGES:-facts speed compile decode lm bible cuda}
LEVERS=${LEVERS:-plain fold fold+bf16w}
DECODE_TRAIN=${DECODE_TRAIN:-25}
DECODE_BATCHES=${DECODE_BATCHES:-16 1 0}
SMOLLM2_SHAPE=${SMOLLM2_SHAPE:-data/smollm2-shape}
SUITE_WORKERS=${SUITE_WORKERS:-10}
mkdir -p "$WORK/logs" "$WORK/runs" "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PYTHON:-python3}
began=$(date +%s)

left() {  # seconds to the DEADLINE (a day without one)
    [ -n "${DEADLINE:-}" ] && echo $((DEADLINE - ($(date +%s) - began))) || echo 86400
}

workers() {  # pytest's -n N where pytest-xdist is installed (not on every rehearsal machine)
    $PY -c 'import xdist' 2>/dev/null && echo "-n $1"
}

stage() {  # stage NAME CAP COMMAND...: run with a cap, log it, note how it ended
    local name=$1 cap=$2
    shift 2
    case " $STAGES " in *" $name "*) ;; *) return ;; esac
    local t0=$(date +%s) rest=$(left)
    [ "$rest" -lt 15 ] && { echo "== $name: skipped (DEADLINE)" | tee -a "$WORK/summary.txt"; return; }
    [ "$rest" -lt "$cap" ] && cap=$rest
    echo "== $name (cap ${cap}s) at +$((t0 - began))s: $*" | tee -a "$WORK/summary.txt"
    timeout -s INT -k 5 "$cap" "$@" >"$WORK/logs/$name.log" 2>&1  # INT: pytest still summarises
    local rc=$?
    echo "== $name: exit $rc after $(($(date +%s) - t0))s" | tee -a "$WORK/summary.txt"
    tail -n 25 "$WORK/logs/$name.log"
    pack
}

pack() {  # the logs and every small result (no weights) in one file; the test logs beside it
    local tarball=$(realpath "$OUT")/gpu-session.tar.gz
    (cd "$WORK" && find summary.txt logs runs -type f \( -name '*.log' -o -name '*.json' \
        -o -name '*.jsonl' -o -name '*.toml' -o -name '*.txt' -o -name '*.out' \) -size -4M -print0 |
        tar -czf "$tarball.tmp" --null -T - && mv "$tarball.tmp" "$tarball")
    for f in summary.txt logs/suite.log logs/cuda.log; do
        [ -f "$WORK/$f" ] && [ "$(realpath "$OUT")" != "$(realpath "$WORK")" ] && cp "$WORK/$f" "$OUT/"
    done
}

SMOKE=${SMOKE:+--smoke}  # SMOKE=1: the benchmarks' tiny modes, to try this script on a CPU
R=$WORK/runs
SRC=data/bible/test.spa REF=data/bible/test.eng
BIBLE_SMOKE="" SUITE_TESTS=${SUITE_TESTS:-tests} CUDA_TESTS=${CUDA_TESTS:-tests/cuda}
if [ -n "$SMOKE" ]; then  # a tiny model for a few steps, 20 test lines, two test files each
    SUITE_TESTS="tests/training/test_schedule.py"
    CUDA_TESTS="tests/cuda/test_loss.py"
    head -n 20 data/bible/test.spa >"$R/test20.spa" && head -n 20 data/bible/test.eng >"$R/test20.eng"
    SRC=$R/test20.spa REF=$R/test20.eng
    for f in train valid; do for l in spa eng; do head -n 1500 "data/bible/$f.$l" >"$R/small.$f.$l"; done; done
    BIBLE_SMOKE="--set model.d_model=64 --set model.d_ff=128 --set model.n_encoder_layers=1 \
        --set model.n_decoder_layers=1 --set data.vocab_size=500 --set train.max_steps=4 \
        --set train.valid_every=4 --set train.bleu_samples=0 --set train.device=cpu \
        --set train.batch_tokens=1000 --set data.text.train_src=$R/small.train.spa \
        --set data.text.train_tgt=$R/small.train.eng --set data.text.valid_src=$R/small.valid.spa \
        --set data.text.valid_tgt=$R/small.valid.eng"
fi
PIN_TRAIN="" PIN_SUITE=""  # the bible run and the suite on separate cores where there are 8+
if [ "$(nproc)" -ge 8 ] && command -v taskset >/dev/null; then
    PIN_TRAIN="taskset -c 0-3" PIN_SUITE="taskset -c 4-$(($(nproc) - 1))"
fi

stage facts 25 bash -c "nvidia-smi; nproc; free -g | head -2; df -h /tmp | tail -1; \
    $PY -c 'import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, \
torch.version.cuda, torch.backends.cudnn.version(), transformers.__version__)'; \
    $PY -m pip list 2>/dev/null | grep -i -E '^(ctranslate2|pytest|pytest-xdist|fastapi|httpx|sacrebleu|tokenizers|safetensors|sentencepiece|triton) '; \
    ls /usr/local/cuda*/lib64/libcublas.so* 2>/dev/null; $PY -c 'import ctranslate2 as c; \
print(\"ctranslate2\", c.__version__, \"cuda devices\", c.get_cuda_device_count())' 2>&1 | tail -1"
stage speed 80 $PY benchmarks/gpu_train.py --facts --model base big --precision bf16 --levers $LEVERS \
    ${SPEED_FLAGS---peer base} --profile base $SMOKE --json "$R/speed.json"
stage compile 110 bash -c "$PY benchmarks/gpu_train.py --model ${COMPILE_BIG:-big} --precision bf16 \
    --levers fold+compile $SMOKE --json $R/compile-big.json; \
    $PY benchmarks/gpu_train.py --model base --precision bf16 --levers ${COMPILE_BASE:-fold+graphs} \
    --warmup 4 --profile base $SMOKE --json $R/compile-base.json"
stage decode 85 $PY benchmarks/gpu_decode.py --train-seconds "$DECODE_TRAIN" --src "$SRC" --ref "$REF" \
    --train-data data/bible --lines 48 --batch $DECODE_BATCHES --batch1-lines 6 --repeats 1 \
    --cell-seconds 2 --max-seconds 80 --work "$R/decode" $SMOKE --json "$R/decode.json"
stage lm 45 $PY benchmarks/gpu_lm.py --shape "$SMOLLM2_SHAPE" --batch 1 32 --precision bf16 fp32 \
    --batch1-prompts 2 --repeats 2 --max-seconds 38 --work "$R/lm" $SMOKE --json "$R/lm.json"
suite_pid=""
case " $STAGES " in *" bible "*) [ "$(left)" -gt 30 ] && {  # the suite beside the bible run
    echo "== suite (in the background, to the deadline) at +$(($(date +%s) - began))s" |
        tee -a "$WORK/summary.txt"
    CUDA_VISIBLE_DEVICES="" timeout -s INT -k 15 "$(($(left) - 10))" $PIN_SUITE $PY -m pytest \
        -m "not cuda" -rA -v $(workers "$SUITE_WORKERS") -p no:cacheprovider \
        --continue-on-collection-errors $SUITE_TESTS >"$WORK/logs/suite.log" 2>&1 &
    suite_pid=$!
}; ;; esac
stage bible 130 bash -c "$PIN_TRAIN $PY -m transformer train configs/gpu-bible-base.toml --out $R/bible \
    --set train.max_minutes=$QUALITY_MINUTES $BIBLE_SMOKE ${BIBLE_SET:-} && $PIN_TRAIN $PY -m transformer \
    evaluate $R/bible/last --src $SRC --ref $REF --output $R/bible/test.out"
stage cuda 300 $PY -m pytest -m cuda $CUDA_TESTS -rA -v $(workers "${CUDA_WORKERS:-4}") -p no:cacheprovider
# not in the default list: the cuda tests and the suite side by side; images; backtranslation
stage tests 90 bash -c "$PY -m pytest -m cuda tests/cuda -q -s -rA -p no:cacheprovider >$WORK/logs/cuda.log 2>&1 & \
    $PY -m pytest -q -rA -n 12 -m 'not cuda' -p no:cacheprovider --continue-on-collection-errors tests; wait"
stage images 150 bash -c "$PY benchmarks/image_guidance.py runs/fashion-mnist-igpt/best \
    --classifier runs/fashion-mnist-vit/best --real data/fashion-mnist/test.safetensors \
    --scales ${GUIDANCE_SCALES:-1 1.5 2 3} --samples 100 --seed 1 --json $R/image-guidance.json && \
    $PY -m transformer evaluate runs/fashion-mnist-igpt/best --images data/fashion-mnist/test.safetensors"
stage backtranslation 420 env WORK="$R/backtranslation" STEPS="${BT_STEPS:-1500}" \
    SET="${BT_SET:---set train.batch_tokens=6144}" VARIANTS="${BT_VARIANTS:-base tagged}" \
    bash benchmarks/backtranslation.sh
if [ -n "$suite_pid" ]; then  # the suite ends by itself or at the deadline (SIGINT: a summary)
    wait "$suite_pid"
    echo "== suite: exit $? at +$(($(date +%s) - began))s; $(grep -E '^(FAILED|ERROR) ' \
        "$WORK/logs/suite.log" | wc -l) failed or errored" | tee -a "$WORK/summary.txt"
    tail -n 5 "$WORK/logs/suite.log"
fi
echo "== done after $(($(date +%s) - began))s" | tee -a "$WORK/summary.txt"
pack
