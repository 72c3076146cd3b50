#!/usr/bin/env bash
# Back-translation, measured (Sennrich et al. 2016; tagged, Caswell et al. 2019): what synthetic
# Spanish, made from English Wikipedia leads by an English -> Spanish model trained here on the
# human pairs, buys the Spanish -> English mixture of configs/es-en.toml.
#
#   bash benchmarks/backtranslation.sh            # from the repository's root
#
# The steps, each a plain command, printed before it runs:
#   1. en-es: configs/en-es.toml for STEPS steps (its cosine ends there); the last 5 averaged
#   2. back-translate data/wiki/train.eng with it (beam 4 and the model's guards), tagged "<bt>"
#   3. es-en on the mixture alone ("base"), on the mixture plus the tagged synthetic pairs
#      ("tagged", weight BT_WEIGHT), and plus the same pairs without the tag ("untagged"): the same
#      steps, seed and settings; the last 5 averaged
#   4. every es-en model on every test split, BLEU, chrF and loop rate
#      (benchmarks/apertium.py --no-apertium; Apertium is scored there on the CPU)
# Needs data/{bible,ui,debian,dictionary,wiki} (docs/guides/data.md has the builders).
# Knobs: STEPS (3000), SET (more --set flags for every training, e.g. a GPU's larger batches),
# DEVICE (auto: the GPU when torch sees one), VARIANTS ("base tagged untagged"), BT_WEIGHT (1),
# LIMIT (back-translate the first N English lines; 0 = all), WORK (runs/backtranslation).
# The results: $WORK/scores.json and the table on standard output.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-3000}
SET=${SET:-}
DEVICE=${DEVICE:-auto}
VARIANTS=${VARIANTS:-base tagged untagged}
BT_WEIGHT=${BT_WEIGHT:-1.0}
LIMIT=${LIMIT:-0}
WORK=${WORK:-runs/backtranslation}
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
for d in bible ui debian dictionary wiki; do
    [ -d "data/$d" ] || { echo "data/$d is missing: build it as docs/guides/data.md says" >&2; exit 2; }
done
mkdir -p "$WORK"

run() { echo "+ $*"; "$@"; }
train() {  # train NAME CONFIG [--set ...]: STEPS steps by the step count, then the last 5 averaged
    local name=$1 config=$2
    shift 2
    [ -f "$WORK/$name/avg5/model.safetensors" ] && { echo "= $name: done before"; return; }
    # shellcheck disable=SC2086  # SET is a list of flags
    run $PY -m transformer train "$config" --out "$WORK/$name" --set train.max_minutes=0 \
        --set train.max_steps="$STEPS" --set train.device="$DEVICE" $SET "$@"
    run $PY -m transformer average "$WORK/$name" --last 5 --out "$WORK/$name/avg5"
}

SOURCES='"data/bible/train.spa", "data/ui/train.spa", "data/debian/train.spa", "data/dictionary/train.spa"'
TARGETS='"data/bible/train.eng", "data/ui/train.eng", "data/debian/train.eng", "data/dictionary/train.eng"'
WEIGHTS='1.0, 2.0, 3.0, 2.0'  # configs/es-en.toml's

train en-es configs/en-es.toml
limit=()
[ "$LIMIT" != 0 ] && limit=(--limit "$LIMIT")
for tag in tagged untagged; do
    case " $VARIANTS " in *" $tag "*) ;; *) continue ;; esac
    [ -f "$WORK/bt-$tag/train.spa" ] && continue
    mkdir -p "$WORK/bt-$tag"
    flag=()
    [ "$tag" = tagged ] && flag=(--tag "<bt>")
    run $PY -m transformer backtranslate "$WORK/en-es/avg5" --input data/wiki/train.eng \
        --out-src "$WORK/bt-$tag/train.spa" --out-tgt "$WORK/bt-$tag/train.eng" --beam 4 \
        --device "$DEVICE" "${limit[@]}" "${flag[@]}"
done

models=()
for variant in $VARIANTS; do
    if [ "$variant" = base ]; then
        train es-en-base configs/es-en.toml
    else
        train "es-en-$variant" configs/es-en.toml \
            --set "data.text.train_src=[$SOURCES, \"$WORK/bt-$variant/train.spa\"]" \
            --set "data.text.train_tgt=[$TARGETS, \"$WORK/bt-$variant/train.eng\"]" \
            --set "data.text.train_weights=[$WEIGHTS, $BT_WEIGHT]"
    fi
    models+=(--model "$variant=$WORK/es-en-$variant/avg5")
done
device=$DEVICE
[ "$device" = auto ] && device=$($PY -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
run $PY benchmarks/apertium.py --no-apertium --device "$device" "${models[@]}" --examples \
    --json "$WORK/scores.json"
