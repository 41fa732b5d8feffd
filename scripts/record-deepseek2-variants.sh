#!/bin/sh
# Records the deepseek2 layout variants of tests/fixtures/deepseek2/ (its README.md: the older
# un-split attn_kv_b form, NextN layers, fused gate/up expert stacks, the MLA context shift)
# and glm4 with NextN layers (tests/fixtures/archs/) with llama.cpp's CPU build; each output
# is recorded again, up to 5 times, until it is whole.
# usage: scripts/record-deepseek2-variants.sh [GGUF_NEW] (default: target/debug/llama-gguf-new)
set -eu
cd "$(dirname "$0")/.."
NEW=${1:-target/debug/llama-gguf-new}
BIN=${LLAMACPP_BIN:-/work/llamacpp-build/bin}
OUT=tests/fixtures/deepseek2
ARCHS=tests/fixtures/archs
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export LD_LIBRARY_PATH="$BIN"
GPL=/work/shared/reference/text/gpl-3.txt

whole() { # file, marker: retry the command after -- until the file holds the marker
    f=$1 marker=$2
    shift 2
    for _ in 1 2 3 4 5; do
        "$@" && grep -q "$marker" "$f" && return 0
    done
    echo "could not record $f whole" >&2
    return 1
}

# greedy text and log, perplexity: dir, name, then llama-gguf-new's arguments
record() {
    D=$1 N=$2
    shift 2
    M=$TMP/$N.gguf
    "$NEW" "$@" --quiet -o "$M"
    whole $D/$N.greedy.log "graphs reused" sh -c \
        "'$BIN/llama-completion' -m '$M' -p 'Once upon a time' -n 16 --temp 0 -no-cnv -c 256 -t 2 -lv 4 \
            < /dev/null > '$D/$N.greedy.txt' 2> '$D/$N.greedy.log'"
    whole $D/$N.perplexity.log "Final estimate" sh -c \
        "'$BIN/llama-perplexity' -m '$M' -f '$GPL' -c 128 --chunks 4 -t 2 \
            < /dev/null > '$D/$N.perplexity.log' 2>&1"
}

# the context shift: 400 tokens through a 256-token context (llama.cpp's smallest), twice
# shifted; `.shift.log` keeps the debug lines of the shifts
shift_run() {
    D=$1 N=$2
    shift 2
    M=$TMP/$N.gguf
    "$NEW" "$@" --quiet -o "$M"
    whole $TMP/$N.shift.full.log "graphs reused" sh -c \
        "'$BIN/llama-completion' -m '$M' -p 'Once upon a time' -n 400 --temp 0 -no-cnv -c 256 -t 2 -v \
            --context-shift --ignore-eos < /dev/null > '$D/$N.shift.txt' 2> '$TMP/$N.shift.full.log'"
    grep -a 'context full, swapping' $TMP/$N.shift.full.log | sed 's/^[0-9.]* D //' > $D/$N.shift.log
}

DS="--layers 2 --embd 128 --ff 256 --ctx 512 --vocab-size 1000 --experts 8 --experts-used 2 --ff-exp 64 --seed 7"
for T in f32 q8_0; do
    record $OUT deepseek2-kvb-$T --arch deepseek2 --heads 4 --heads-kv 4 --mla-kv-b $DS --type $T
    record $OUT deepseek2-v3-nextn-$T --arch deepseek2-v3 --heads 4 --heads-kv 1 --nextn 1 $DS --type $T
    record $OUT deepseek2-v3-fused-$T --arch deepseek2-v3 --heads 4 --heads-kv 1 --fused-gate-up-exps $DS --type $T
    record $ARCHS glm4-nextn-$T --arch glm4 --layers 2 --embd 128 --heads 4 --heads-kv 2 --ff 256 \
        --ctx 512 --vocab-size 1000 --seed 7 --nextn 1 --type $T
done
M=$TMP/kvb-nofa.gguf
"$NEW" --arch deepseek2 --heads 4 --heads-kv 4 --mla-kv-b $DS --type f32 --quiet -o "$M"
whole $OUT/deepseek2-kvb-f32.nofa.greedy.log "graphs reused" sh -c \
    "'$BIN/llama-completion' -m '$M' -p 'Once upon a time' -n 16 --temp 0 -no-cnv -c 256 -t 2 -lv 4 -fa off \
        < /dev/null > '$OUT/deepseek2-kvb-f32.nofa.greedy.txt' 2> '$OUT/deepseek2-kvb-f32.nofa.greedy.log'"
shift_run $OUT deepseek2-v3-f32 --arch deepseek2-v3 --heads 4 --heads-kv 1 $DS --type f32
shift_run $OUT deepseek2-kvb-f32 --arch deepseek2 --heads 4 --heads-kv 4 --mla-kv-b $DS --type f32

# the eval-callback nodes of the un-split attention and of the fused stacks
for V in "deepseek2-kvb --arch deepseek2 --heads 4 --heads-kv 4 --mla-kv-b" \
    "deepseek2-v3-fused --arch deepseek2-v3 --heads 4 --heads-kv 1 --fused-gate-up-exps"; do
    set -- $V
    N=$1
    shift
    M=$TMP/$N-evalcb.gguf
    "$NEW" "$@" $DS --type f32 --quiet -o "$M"
    whole $OUT/$N-f32.eval-callback.log "result_output" sh -c \
        "'$BIN/llama-eval-callback' -m '$M' -p 'hi there' -n 1 --seed 1 -c 256 -t 2 \
            < /dev/null > '$OUT/$N-f32.eval-callback.log' 2>&1"
done

# llama-quantize's output on the f32 variants: sha256 of each file
rm -f $OUT/quantize.sha256
for V in "deepseek2-kvb --arch deepseek2 --heads 4 --heads-kv 4 --mla-kv-b" \
    "deepseek2-v3-nextn --arch deepseek2-v3 --heads 4 --heads-kv 1 --nextn 1" \
    "deepseek2-v3-fused --arch deepseek2-v3 --heads 4 --heads-kv 1 --fused-gate-up-exps"; do
    set -- $V
    N=$1
    shift
    M=$TMP/$N-quant.gguf
    "$NEW" "$@" $DS --type f32 --quiet -o "$M"
    for Q in q8_0 q4_k_m; do
        "$BIN/llama-quantize" "$M" "$TMP/$N-$Q.gguf" $Q > /dev/null 2>&1
        (cd $TMP && sha256sum "$N-$Q.gguf") >> $OUT/quantize.sha256
    done
done
