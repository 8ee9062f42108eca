# syntax=docker/dockerfile:1
# One image for the whole system: `nsq-operator` (the default command), `nsqd`,
# `nsqlookupd` and `nsqadmin`; the operator's StatefulSets and nsqadmin Deployment run
# them from this same image.
#   docker build -t nsq-operator:0.1.0 .
# Only the project and its runtime dependencies are installed: no Spark, no test tools.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY protocol/ protocol/
COPY broker/ broker/
COPY lookupd/ lookupd/
COPY admin/ admin/
COPY client/ client/
COPY local/ local/
COPY operator/ operator/
COPY pipeline/ pipeline/
RUN pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# The wheels are mounted for the install only, so they leave no layer behind. The uid
# is the one the operator's pods run as (runAsUser 65532); /data is nsqd's data path.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels nsq-operator \
 && groupadd --system --gid 65532 nsq \
 && useradd --system --uid 65532 --gid nsq --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin nsq \
 && mkdir /data && chown nsq:nsq /data
# Pods run with a read-only root filesystem: nothing may try to write bytecode.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /data
EXPOSE 4150 4151 4160 4161 4171 8080
CMD ["nsq-operator"]
