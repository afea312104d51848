#!/usr/bin/env bash
# Build llama-cpp-python (llama.cpp's grammar sampler, props/backends/llama_cpp.py) from its source
# distribution, CPU only and as light as the build allows, and install it. Not part of .ci/run: the
# build takes minutes, so the adapter stays optional and
# its tests skip without it. Measured here: 931 s on one core of a shared 2-core machine.
#
#   bash ci/install_llama_cpp.sh            install into the active Python environment
#   bash ci/install_llama_cpp.sh DIR        install into DIR (pip --target --no-deps, plus diskcache;
#                                           numpy, jinja2 and typing-extensions come from the
#                                           environment; put DIR on PYTHONPATH)
#
#   LLAMA_CPP_PYTHON_VERSION  the release to build (default 0.3.36)
#   CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default 1: the machine is shared)
#
# Idempotent: when the requested release is already installed (in DIR when given) it prints so and exits
# 0 without downloading or building anything. Prints how long the build took. The adapter needs no model
# file: it writes a vocabulary-only GGUF from each maskcert vocabulary (props/backends/llama_cpp.py).
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
TARGET="${1:-}"
PY="${PYTHON:-python3}"

installed() {
    if [ -n "$TARGET" ]; then
        PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c \
            "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$VERSION')" 2>/dev/null
    else
        "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$VERSION')" \
            2>/dev/null
    fi
}

if installed; then
    echo "install_llama_cpp: llama-cpp-python $VERSION is already installed${TARGET:+ in $TARGET}"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$VERSION" -d "$work"
sdist="$(ls "$work"/llama_cpp_python-"$VERSION".tar.gz)"


# CPU only, no native tuning (the wheel runs on any x86-64), none of llama.cpp's tools, tests,
# examples, server, multimodal library (LLAVA_BUILD), OpenMP, BLAS, curl or OpenSSL.
export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
-DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_RPC=OFF \
-DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DLLAVA_BUILD=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
-DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-1}"

start=$(date +%s)
if [ -n "$TARGET" ]; then
    # the dependencies of the environment stay (numpy, jinja2, typing-extensions): only diskcache is added
    "$PY" -m pip install --disable-pip-version-check --no-cache-dir --no-deps --target "$TARGET" "$sdist" \
        diskcache
else
    "$PY" -m pip install --disable-pip-version-check --no-cache-dir "$sdist"
fi
end=$(date +%s)
echo "install_llama_cpp: built and installed llama-cpp-python $VERSION${TARGET:+ into $TARGET} in $((end - start)) s"
