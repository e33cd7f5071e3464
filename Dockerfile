# One image for every role: `webhook-service api|worker|scheduler` (see docker-compose.yml).
# The build stage installs the package and its runtime dependencies into a virtualenv; the
# final stage receives only that virtualenv. No compiler, pip cache, dev dependency, test or
# secret reaches it: keys and URLs come from the environment when a container starts.
ARG PYTHON_IMAGE=python:3.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook_service ./webhook_service
COPY signer ./signer
COPY workers ./workers
# The plain project: its [dev] extra (pytest, mypy, ...) is never installed.
RUN /opt/venv/bin/pip install --no-cache-dir .

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 webhook \
 && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /app \
    --shell /usr/sbin/nologin webhook
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    WEBHOOK_HOST=0.0.0.0 \
    WEBHOOK_PORT=8000
WORKDIR /app
USER 10001:10001
EXPOSE 8000
# Meaningful for the api role; compose gives the worker and scheduler checks of their own.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('WEBHOOK_PORT', '8000'), timeout=2)"]
ENTRYPOINT ["webhook-service"]
CMD ["api"]
