# syntax=docker/dockerfile:1.7
# mgmatch service images. Targets:
#   cpu  (default) — API, matchmaker, solver and inference workers on the CPU: the wheel with the
#                    [grpc] extra (`pip install 'mgmatch[grpc]'`), so no torch.
#   cuda           — the same with onnxruntime-gpu ([gpu]), for the inference worker on a GPU. Its base
#                    (nvidia/cuda) comes from a container registry, so it builds only where one is
#                    reachable; `make image-test` builds and runs the cpu target alone.
# BASE is any image with Python 3.11 and its venv module: python:3.11-slim where a registry is
# reachable, or a Debian bookworm base made from Debian packages where none is (scripts/image-test.sh
# makes one with debootstrap; see docs/guides/deploy-images.md).
# Build:  docker build --target cpu -t mgmatch:cpu .   |   docker build --target cuda -t mgmatch:cuda .
#         podman build --build-arg BASE=localhost/mgmatch-base:bookworm --target cpu -t mgmatch:cpu .
ARG BASE=python:3.11-slim
ARG CUDA_BASE=nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04

# ---------------------------------------------------------------- build: the mgmatch wheel
FROM ${BASE} AS build
RUN python3 -m venv /opt/build && /opt/build/bin/pip install --no-cache-dir "setuptools>=69" wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY mgmatch ./mgmatch
COPY core ./core
COPY solvers ./solvers
COPY models ./models
COPY pipeline ./pipeline
COPY app ./app
COPY lab ./lab
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

# ---------------------------------------------------------------- cpu: the service image
FROM ${BASE} AS cpu
# the extras the service installs with the wheel (the gRPC API beside HTTP)
ARG EXTRAS=grpc
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    OMP_NUM_THREADS=1 \
    PATH=/opt/venv/bin:$PATH \
    MGMATCH_CONFIG=/etc/mgmatch/service.yaml
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin mgmatch
COPY --from=build /wheels /wheels
# the wheel and its declared dependencies: pyproject.toml is the one list of what the service needs
RUN python3 -m venv /opt/venv \
 && pip install --no-cache-dir "$(ls /wheels/mgmatch-*.whl)[${EXTRAS}]" \
 && rm -rf /wheels
# the local searches' numba kernel, compiled once at build into a cache the service user owns
ENV NUMBA_CACHE_DIR=/opt/numba-cache
RUN python -c "from mgmatch.solvers.moves import warm; warm()" && chown -R mgmatch /opt/numba-cache
COPY deploy/config/service.yaml /etc/mgmatch/service.yaml
USER mgmatch
EXPOSE 8000 50051 9100
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"
ENTRYPOINT ["mgmatch"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]

# ---------------------------------------------------------------- cuda: inference on a GPU
# Needs a registry for its base (nvidia/cuda); not built where none is reachable.
FROM ${CUDA_BASE} AS cuda
ARG EXTRAS=grpc,gpu
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DEBIAN_FRONTEND=noninteractive \
    PATH=/opt/venv/bin:$PATH \
    MGMATCH_CONFIG=/etc/mgmatch/service.yaml
RUN apt-get update \
 && apt-get install -y --no-install-recommends software-properties-common ca-certificates \
 && add-apt-repository -y ppa:deadsnakes/ppa \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin mgmatch
COPY --from=build /wheels /wheels
# [gpu] adds onnxruntime-gpu; the CPU build the core dependencies bring shares its module name, so it
# goes and the GPU build is reinstalled over it (the runtime picks CUDAExecutionProvider when present)
RUN pip install --no-cache-dir "$(ls /wheels/mgmatch-*.whl)[${EXTRAS}]" \
 && pip uninstall -y onnxruntime \
 && pip install --no-cache-dir --force-reinstall --no-deps "onnxruntime-gpu>=1.17" \
 && rm -rf /wheels
ENV NUMBA_CACHE_DIR=/opt/numba-cache
RUN python -c "from mgmatch.solvers.moves import warm; warm()" && chown -R mgmatch /opt/numba-cache
COPY deploy/config/service.yaml /etc/mgmatch/service.yaml
USER mgmatch
EXPOSE 9100
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9100/metrics', timeout=2)"
ENTRYPOINT ["mgmatch"]
CMD ["worker", "inference"]
