# The cronwheel image: one program, every role (`cronwheel api`, `scheduler`, `worker`, `server`,
# and the CLI). Build it with `docker build -t cronwheel .` (docs/deploy.md).
#
# Dependencies come only from hash-checked locks: requirements/build.lock (the build backend, in the
# build stage only) and requirements/runtime.lock (cronwheel's own dependencies, no development
# tools); both are subsets of requirements/dev.lock at the same versions (tests/deploy checks it).
# The image runs as UID 10001 and writes nothing in cluster mode, so it runs on a read-only root
# filesystem; /tmp (TMPDIR, HOME) is the only scratch space it uses (mount an emptyDir or tmpfs).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY requirements/build.lock requirements/runtime.lock requirements/
RUN python -m venv /opt/build \
    && /opt/build/bin/pip install --require-hashes -r requirements/build.lock \
    && python -m venv /opt/cronwheel \
    && /opt/cronwheel/bin/pip install --require-hashes -r requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY src src
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /dist . \
    && /opt/cronwheel/bin/pip install --no-deps /dist/cronwheel-*.whl

FROM ${PYTHON_IMAGE}
RUN groupadd --gid 10001 cronwheel \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin cronwheel \
    && mkdir /data && chown 10001:10001 /data
COPY --from=build /opt/cronwheel /opt/cronwheel
# CRONWHEEL_HOST: a container's loopback is unreachable from outside it. /data: the working
# directory, where `cronwheel server` keeps its SQLite file (embedded mode only; mount a volume).
ENV PATH=/opt/cronwheel/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp \
    CRONWHEEL_HOST=0.0.0.0
WORKDIR /data
USER 10001:10001
# 8080: the API (api and server: also /metrics, /healthz, /readyz); 9100: /metrics and /healthz
# of a scheduler or worker when given CRONWHEEL_METRICS_PORT=9100 (the manifests do).
EXPOSE 8080 9100
ENTRYPOINT ["cronwheel"]
CMD ["--help"]
