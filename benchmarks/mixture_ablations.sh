#!/usr/bin/env bash
# What each part of the Spanish -> English mixture (configs/es-en.toml) buys, at equal steps:
#   base     the recipe as it is
#   tags     every source line starts with its domain's tag (<bible>, <ui>, <deb>, <dict>), the
#            validation and test sources too (Kobus et al. 2017's domain control)
#   nodict   without the FreeDict word list
#   bt       with the tagged back-translated Wikipedia leads as a fifth source (weight BT_WEIGHT;
#            benchmarks/backtranslation.sh makes them: BT_DIR/train.{spa,eng})
#
#   bash benchmarks/mixture_ablations.sh          # from the repository's root
#
# Each variant trains STEPS steps (its cosine ends there) with the same seed and settings, then its
# last 5 checkpoints are averaged and scored on every test split (benchmarks/apertium.py
# --no-apertium: beam 4, the recipe's guards; BLEU, chrF, loops), the tagged model on tagged
# copies of the test sources. PARALLEL=1 trains the variants at once (a GPU has room for four of
# these small models; on a CPU leave it 0). Knobs: STEPS (3000), SET (more --set flags, e.g. a
# GPU's larger batches), DEVICE (auto), VARIANTS ("base tags nodict bt"), BT_DIR
# (runs/backtranslation/bt-tagged), BT_WEIGHT (1), WORK (runs/ablations). Results:
# $WORK/scores.json and $WORK/scores-tags.json, and the tables on standard output.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-3000}
SET=${SET:-}
DEVICE=${DEVICE:-auto}
VARIANTS=${VARIANTS:-base tags nodict bt}
BT_DIR=${BT_DIR:-runs/backtranslation/bt-tagged}
BT_WEIGHT=${BT_WEIGHT:-1.0}
PARALLEL=${PARALLEL:-0}
WORK=${WORK:-runs/ablations}
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
DOMAINS="bible ui debian dictionary"
declare -A TAG=([bible]="<bible>" [ui]="<ui>" [debian]="<deb>" [dictionary]="<dict>")
for d in $DOMAINS; do
    [ -d "data/$d" ] || { echo "data/$d is missing: build it as docs/guides/data.md says" >&2; exit 2; }
done
case " $VARIANTS " in *" bt "*)
    [ -f "$BT_DIR/train.spa" ] || { echo "$BT_DIR/train.spa is missing: run benchmarks/backtranslation.sh first" >&2; exit 2; } ;;
esac
mkdir -p "$WORK"

# the tagged copies: each line of a source file after its domain's tag and a space
for d in $DOMAINS; do
    mkdir -p "$WORK/tagged/$d"
    for f in data/$d/*.spa; do
        sed "s/^/${TAG[$d]} /" "$f" >"$WORK/tagged/$d/$(basename "$f")"
    done
    for f in data/$d/*.eng; do cp "$f" "$WORK/tagged/$d/"; done
done

list() {  # list ROOT SPLIT EXT [DOMAINS...]: a TOML list of ROOT/DOMAIN/SPLIT.EXT
    local root=$1 split=$2 ext=$3 out=""
    shift 3
    for d in "$@"; do
        [ -f "$root/$d/$split.$ext" ] && out+="${out:+, }\"$root/$d/$split.$ext\""
    done
    echo "[$out]"
}

flags() {  # the --set flags of a variant's data
    case $1 in
        base) ;;
        tags)
            echo "--set data.text.train_src=$(list "$WORK/tagged" train spa $DOMAINS)"
            echo "--set data.text.valid_src=$(list "$WORK/tagged" valid spa bible ui debian)" ;;
        nodict)
            echo "--set data.text.train_src=$(list data train spa bible ui debian)"
            echo "--set data.text.train_tgt=$(list data train eng bible ui debian)"
            echo "--set data.text.train_weights=[1.0,2.0,3.0]" ;;
        bt)
            echo "--set data.text.train_src=[$(list data train spa $DOMAINS | tr -d '[]'),\"$BT_DIR/train.spa\"]"
            echo "--set data.text.train_tgt=[$(list data train eng $DOMAINS | tr -d '[]'),\"$BT_DIR/train.eng\"]"
            echo "--set data.text.train_weights=[1.0,2.0,3.0,2.0,$BT_WEIGHT]" ;;
        *) echo "unknown variant $1 (base, tags, nodict, bt)" >&2; exit 2 ;;
    esac
}

train() {  # train VARIANT: STEPS steps by the step count, then the last 5 averaged
    local name=$1
    [ -f "$WORK/$name/avg5/model.safetensors" ] && { echo "= $name: done before"; return; }
    local -a data
    mapfile -t data < <(flags "$name")
    local -a more=()
    for flag in "${data[@]}"; do [ -n "$flag" ] && more+=(--set "${flag#--set }"); done
    echo "+ train $name: ${more[*]:-} $SET"
    # shellcheck disable=SC2086  # SET is a list of flags
    $PY -m transformer train configs/es-en.toml --out "$WORK/$name" --set train.max_minutes=0 \
        --set train.max_steps="$STEPS" --set train.device="$DEVICE" $SET "${more[@]}" \
        >"$WORK/$name.log" 2>&1 || { tail -n 20 "$WORK/$name.log"; return 1; }
    $PY -m transformer average "$WORK/$name" --last 5 --out "$WORK/$name/avg5" >>"$WORK/$name.log" 2>&1
    tail -n 3 "$WORK/$name.log"
}

pids=()
for variant in $VARIANTS; do
    if [ "$PARALLEL" = 1 ]; then train "$variant" & pids+=($!); else train "$variant"; fi
done
for pid in "${pids[@]}"; do wait "$pid"; done

device=$DEVICE
[ "$device" = auto ] && device=$($PY -c "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')")
plain=() tagged=()
for variant in $VARIANTS; do
    if [ "$variant" = tags ]; then tagged+=(--model "$variant=$WORK/$variant/avg5")
    else plain+=(--model "$variant=$WORK/$variant/avg5"); fi
done
[ ${#plain[@]} -gt 0 ] && $PY benchmarks/apertium.py --no-apertium --device "$device" "${plain[@]}" \
    --examples --json "$WORK/scores.json"
[ ${#tagged[@]} -gt 0 ] && $PY benchmarks/apertium.py --no-apertium --device "$device" "${tagged[@]}" \
    --split "bible=$WORK/tagged/bible" --split "ui=$WORK/tagged/ui" --split "debian=$WORK/tagged/debian" \
    --json "$WORK/scores-tags.json"
exit 0
