# syntax=docker/dockerfile:1
# The Gaigel game server: `gaigel serve` on 0.0.0.0:50051 (gRPC) and 0.0.0.0:9464 (metrics),
# as an unprivileged user. Build: docker build -t gaigel . (see docker/README.md for podman).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- builder: the project and its dependencies in a venv ------------------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/gaigel
WORKDIR /src
COPY . .
# A CA bundle for pip can be passed as the build secret `pip_ca` (for a TLS-intercepting
# proxy); without it pip uses its own. pip's cache stays in a build cache, not in a layer.
RUN --mount=type=secret,id=pip_ca \
    --mount=type=cache,target=/root/.cache/pip \
    if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi \
    && /opt/gaigel/bin/pip install . \
    && /opt/gaigel/bin/pip uninstall --yes pip setuptools \
    && /opt/gaigel/bin/gaigel --help >/dev/null
COPY --chmod=0755 docker/healthcheck.py /opt/gaigel/bin/gaigel-healthcheck

# --- runtime ----------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 gaigel \
    && useradd --system --uid 10001 --gid gaigel --home-dir /var/lib/gaigel --create-home \
        --shell /usr/sbin/nologin gaigel
COPY --from=builder /opt/gaigel /opt/gaigel
ENV PATH=/opt/gaigel/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /var/lib/gaigel
# gRPC (BotService, MatchService, health, reflection) and Prometheus metrics.
EXPOSE 50051 9464
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 CMD ["gaigel-healthcheck"]
# gaigel serve finishes its matches' streams and exits on SIGTERM within --grace seconds;
# 8 s keeps it inside Docker's default 10 s stop timeout.
STOPSIGNAL SIGTERM
CMD ["gaigel", "serve", "--address", "0.0.0.0:50051", "--metrics-address", "0.0.0.0", "--metrics-port", "9464", "--grace", "8"]
