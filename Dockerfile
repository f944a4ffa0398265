# syntax=docker/dockerfile:1.7
# mgmatch service images. Targets:
#   cpu  (default) — API, matchmaker, solver and inference workers on the CPU; no torch.
#   cuda           — the same with onnxruntime-gpu, for the inference worker on a GPU.
# Build:  docker build --target cpu -t mgmatch:cpu .   |   docker build --target cuda -t mgmatch:cuda .
ARG PYTHON_VERSION=3.11

# ---------------------------------------------------------------- build: the mgmatch wheel
FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir "setuptools>=69" wheel
COPY pyproject.toml README.md ./
COPY mgmatch ./mgmatch
COPY core ./core
COPY solvers ./solvers
COPY models ./models
COPY pipeline ./pipeline
COPY app ./app
COPY lab ./lab
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

# ---------------------------------------------------------------- cpu: the service image
FROM python:${PYTHON_VERSION}-slim AS cpu
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    OMP_NUM_THREADS=1 \
    MGMATCH_CONFIG=/etc/mgmatch/service.yaml
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin mgmatch
COPY deploy/requirements-service.txt /tmp/requirements-service.txt
RUN pip install --no-cache-dir -r /tmp/requirements-service.txt
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels /tmp/requirements-service.txt
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
FROM nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04 AS cuda
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DEBIAN_FRONTEND=noninteractive \
    MGMATCH_CONFIG=/etc/mgmatch/service.yaml
RUN apt-get update \
 && apt-get install -y --no-install-recommends software-properties-common ca-certificates \
 && add-apt-repository -y ppa:deadsnakes/ppa \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
RUN useradd --uid 10001 --create-home --shell /usr/sbin/nologin mgmatch
COPY deploy/requirements-service.txt /tmp/requirements-service.txt
# onnxruntime-gpu replaces the CPU build (the runtime picks CUDAExecutionProvider when present)
RUN grep -v '^onnxruntime' /tmp/requirements-service.txt > /tmp/req-gpu.txt \
 && pip install --no-cache-dir -r /tmp/req-gpu.txt "onnxruntime-gpu>=1.17"
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels /tmp/req*.txt
ENV NUMBA_CACHE_DIR=/opt/numba-cache
RUN python -c "from mgmatch.solvers.moves import warm; warm()" && chown -R mgmatch /opt/numba-cache
COPY deploy/config/service.yaml /etc/mgmatch/service.yaml
USER mgmatch
EXPOSE 9100
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9100/metrics', timeout=2)"
ENTRYPOINT ["mgmatch"]
CMD ["worker", "inference"]
