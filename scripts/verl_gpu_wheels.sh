#!/usr/bin/env bash
# The packages verl's tests need on a GPU machine that has PyTorch, transformers and the usual
# scientific stack but no verl and no network (scripts/gpu_train_check.sh's verl part installs
# them from here). Run where there is a network; copy the folder over.
#
#   scripts/verl_gpu_wheels.sh [DIR]     (default .verl-wheels; PYTHON_VERSION=3.12 by default)
#
# verl 0.9.1 pins transformers below 5.11, so that one comes too. Ray is repacked: its wheel
# (79 MB) holds the cluster's server binaries (GCS server, raylet), its Java jars, the dashboard's
# web client and the runtime-env agent's bundled packages. verl's modules import Ray but the parts
# tested there (the agent loop on a scripted server manager, the reward function, the datasets)
# start no Ray cluster, so the archive keeps Ray's Python package and core library only (13 MB):
# ray.init() does not work from it. Where Ray must run, install its wheel as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.verl-wheels}
PY=${PYTHON_VERSION:-3.12}
TAG=cp${PY/./}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$1" "${@:2}"
}
# verl and what its modules import that such a machine lacks (boto3, which accelerate tries, is left out)
download "$DIR" verl==0.9.1 transformers==5.10.4 tensordict==0.10.0 pyvers==0.1.0 TransferQueue==0.1.11 \
  hydra-core==1.3.8 omegaconf==2.3.1 codetiming==1.4.0 nvtx==0.2.17 msgspec==0.23.0 pyzmq==27.3.0 \
  cachetools==8.0.2 colorful==0.5.8 fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 \
  python-multipart==0.0.34 google-api-core==2.44.0 google-auth==2.63.0 googleapis-common-protos==1.76.0 \
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2 \
  opentelemetry-semantic-conventions==0.66b2 opentelemetry-exporter-prometheus==0.66b2 \
  opentelemetry-exporter-http-transport==0.66b2 opentelemetry-exporter-otlp-common==0.66b2 \
  opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 \
  orjson==3.13.0 tokenizers==0.22.2 trio==0.22.2 outcome==1.3.0.post0 jsonpointer==3.1.1 rfc3339-validator==0.1.4 wcwidth==0.7.0
# OmegaConf's parser runtime is published as a source archive only: build its (pure Python) wheel
python3 -m pip wheel -q --no-deps --no-build-isolation antlr4-python3-runtime==4.9.3 -w "$DIR"
# Ray without its servers
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
download "$work" ray==2.60.0
mkdir "$work/tree"
(cd "$work/tree" && python3 -m zipfile -e "$work"/ray-*.whl . \
  && rm -rf ray/core/src/ray/raylet/raylet ray/core/src/ray/gcs/gcs_server ray/jars ray/dashboard/client/build \
            ray/_private/runtime_env/agent/thirdparty_files \
  && tar cJf "$DIR/ray-2.60.0-$TAG-without-servers.tar.xz" .)
du -sh "$DIR"
