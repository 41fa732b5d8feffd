#!/bin/sh
# Records tests/fixtures/deepseek2/ with llama.cpp's CPU build (see its README.md): each tool's
# output is recorded again, up to 5 times, until it is whole (llama.cpp's log thread can exit
# before its last lines on a loaded machine).
# usage: scripts/record-deepseek2-fixtures.sh [GGUF_NEW] (default: target/debug/llama-gguf-new)
set -eu
cd "$(dirname "$0")/.."
NEW=${1:-target/debug/llama-gguf-new}
BIN=${LLAMACPP_BIN:-/work/llamacpp-build/bin}
OUT=tests/fixtures/deepseek2
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

for A in deepseek2 deepseek2-v3; do
    for T in f32 q8_0; do
        M=$TMP/$A-$T.gguf
        "$NEW" --arch $A --layers 2 --embd 128 --heads 4 --heads-kv 1 --ff 256 --ctx 512 \
            --vocab-size 1000 --experts 8 --experts-used 2 --ff-exp 64 --type $T --seed 7 \
            --quiet -o "$M"
        whole $OUT/$A-$T.greedy.log "graphs reused" sh -c \
            "'$BIN/llama-completion' -m '$M' -p 'Once upon a time' -n 16 --temp 0 -no-cnv -c 256 -t 2 -lv 4 \
                < /dev/null > '$OUT/$A-$T.greedy.txt' 2> '$OUT/$A-$T.greedy.log'"
        whole $OUT/$A-$T.perplexity.log "Final estimate" sh -c \
            "'$BIN/llama-perplexity' -m '$M' -f '$GPL' -c 128 --chunks 4 -t 2 \
                < /dev/null > '$OUT/$A-$T.perplexity.log' 2>&1"
        if [ $T = f32 ]; then
            # without flash attention: the kqv_mla decompression instead of fattn_mla
            whole $OUT/$A-f32.nofa.greedy.log "graphs reused" sh -c \
                "'$BIN/llama-completion' -m '$M' -p 'Once upon a time' -n 16 --temp 0 -no-cnv -c 256 -t 2 -lv 4 -fa off \
                    < /dev/null > '$OUT/$A-f32.nofa.greedy.txt' 2> '$OUT/$A-f32.nofa.greedy.log'"
            if [ $A = deepseek2-v3 ]; then
                rm -f $OUT/$A-f32.hello.session
                whole $OUT/$A-f32.hello.txt "printti" sh -c \
                    "rm -f '$OUT/$A-f32.hello.session'; '$BIN/llama-completion' -m '$M' -p 'Hello my name is' -n 8 --temp 0 -no-cnv -c 256 -t 2 \
                        --prompt-cache '$OUT/$A-f32.hello.session' < /dev/null > '$OUT/$A-f32.hello.txt' 2> /dev/null"
            fi
            whole $OUT/$A-f32.eval-callback.log "result_output" sh -c \
                "'$BIN/llama-eval-callback' -m '$M' -p 'hi there' -n 1 --seed 1 -c 256 -t 2 \
                    < /dev/null > '$OUT/$A-f32.eval-callback.log' 2>&1"
        fi
    done
done

# mistral3 with Ministral 3's YaRN keys (tests/fixtures/archs/README.md)
ARCHS=tests/fixtures/archs
for T in f32 q8_0; do
    M=$TMP/mistral3-yarn-$T.gguf
    "$NEW" --arch mistral3 --layers 2 --embd 128 --heads 4 --heads-kv 2 --ff 256 --ctx 512 \
        --vocab-size 1000 --type $T --seed 7 --quiet --yarn 4 -o "$M"
    whole $ARCHS/mistral3-yarn-$T.greedy.log "graphs reused" sh -c \
        "'$BIN/llama-completion' -m '$M' -p 'Once upon a time' -n 16 --temp 0 -no-cnv -c 256 -t 2 -lv 4 \
            < /dev/null > '$ARCHS/mistral3-yarn-$T.greedy.txt' 2> '$ARCHS/mistral3-yarn-$T.greedy.log'"
    whole $ARCHS/mistral3-yarn-$T.perplexity.log "Final estimate" sh -c \
        "'$BIN/llama-perplexity' -m '$M' -f '$GPL' -c 128 --chunks 4 -t 2 \
            < /dev/null > '$ARCHS/mistral3-yarn-$T.perplexity.log' 2>&1"
done
