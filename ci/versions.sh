#!/usr/bin/env bash
# Nightly-sized, not part of .ci/run: certify the oldest and the newest supported release of each
# engine (props.backends.REGISTRY: `tested` range, `releases`) on the built-in corpus, each release
# installed into the engine cache (--backend NAME==VERSION; props/backends/engines.py) so the
# environment's own engines are untouched. Needs a reachable package index the first time; later runs
# reuse the cache. A release that cannot be driven (an adapter fault) exits 2 or 3 and fails the job;
# findings (exit 1) are the releases' defects and are reported, not failed on.
#   MASKCERT_ENGINE_CACHE     the engine cache (default ~/.cache/maskcert/engines)
#   MASKCERT_VERSIONS_TOKENIZER  tokenizer (default bpe)
#   MASKCERT_VERSIONS_EXAMPLES   Hypothesis examples per search (default 2)
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --disable-pip-version-check -c ci/constraints.txt -e '.[dev,backends]' || exit 2
OUT="${1:-versions-nightly}"
TOKENIZER="${MASKCERT_VERSIONS_TOKENIZER:-bpe}"
EXAMPLES="${MASKCERT_VERSIONS_EXAMPLES:-2}"
status=0
# Not installable into the engine cache as-is: llama-cpp-python builds natively from source (use
# ci/install_llama_cpp.sh, CPU flags, ~15 min) and syncode pins transformers 4.53, which would shadow the
# environment's transformers in the worker. Their single tested release is certified where installed.
SKIP="llama-cpp syncode"
echo "== skipped (not installable into the engine cache): $SKIP"
pairs=$(python3 -c "
from props.backends import ENGINES, REGISTRY
for name in ENGINES:
    if name in '$SKIP'.split():
        continue
    releases = REGISTRY[name].releases
    for v in dict.fromkeys(releases[:1] + releases[-1:]):
        print(f'{name}=={v}')
")
for backend in $pairs; do
    out="$OUT/${backend/==/-}"
    echo "== maskcert certify --backend $backend"
    python3 -m maskcert.cli certify --backend "$backend" --tokenizer "$TOKENIZER" --corpus builtin \
        --examples "$EXAMPLES" --minimize-seconds 5 --out "$out"
    rc=$?
    case "$rc" in
        0) echo "== $backend: no failing finding" ;;
        1) echo "== $backend: findings (the release's defects, see $out/report.md)" ;;
        *) echo "== $backend: exit $rc (could not be certified)"; status=1 ;;
    esac
done
exit $status
