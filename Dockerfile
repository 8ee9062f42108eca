# syntax=docker/dockerfile:1
# One image for the whole system: `nsq-operator` (the default command), `nsqd`,
# `nsqlookupd` and `nsqadmin`; the operator's StatefulSets and nsqadmin Deployment run
# them from this same image.
#   docker build -t nsq-operator:0.1.0 .
# and reproducibly (BuildKit 0.13 or later; buildah: --timestamp, as e2e/cluster/images.sh):
#   docker buildx build --build-arg SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" \
#     --output type=docker,rewrite-timestamp=true,name=nsq-operator:0.1.0 .
# Only the project and its runtime dependencies are installed: no Spark, no test tools.
#
# Reproducible: the same tree, base and SOURCE_DATE_EPOCH give the same image. The base is
# an argument the release sets to python:3.11-slim@sha256:... (docs/releasing.md); the
# versions installed are image-constraints.txt's; bytecode is compiled as unchecked-hash
# .pyc files, which carry no timestamp; the builder clamps file times to SOURCE_DATE_EPOCH
# (buildah --timestamp, BuildKit's rewrite-timestamp), and useradd dates the account by it.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ARG SOURCE_DATE_EPOCH
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    PIP_CONSTRAINT=/src/image-constraints.txt PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE image-constraints.txt ./
COPY protocol/ protocol/
COPY broker/ broker/
COPY lookupd/ lookupd/
COPY admin/ admin/
COPY client/ client/
COPY local/ local/
COPY operator/ operator/
COPY pipeline/ pipeline/
# A virtual environment without pip: the final image gets the project and its
# dependencies, not the installer. The extension modules' debug information (uvloop's
# alone is 11 MB of its 13.6) is stripped with binutils, which stays in this stage.
# Bytecode is compiled once here, so that pods (whose root file system is read-only) never
# compile at start.
RUN apt-get update -qq && apt-get install -qq -y --no-install-recommends binutils >/dev/null \
 && pip wheel --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/nsq-operator \
 && pip --python /opt/nsq-operator/bin/python install --no-compile --no-index --find-links=/wheels nsq-operator \
 && find /opt/nsq-operator -name '*.so' -exec strip --strip-debug {} + \
 && python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/nsq-operator/lib

FROM ${PYTHON_IMAGE}
ARG SOURCE_DATE_EPOCH
COPY --from=build /opt/nsq-operator /opt/nsq-operator
# The uid is the one the operator's pods run as (runAsUser 65532); /data is nsqd's data path.
RUN groupadd --system --gid 65532 nsq \
 && useradd --system --no-log-init --uid 65532 --gid nsq --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin nsq \
 && mkdir /data && chown nsq:nsq /data
# Pods run with a read-only root filesystem: nothing may try to write bytecode.
ENV PATH=/opt/nsq-operator/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /data
EXPOSE 4150 4151 4160 4161 4171 8080
CMD ["nsq-operator"]
