# kai-ray's image: the scheduler (`kai-ray run`), the CRD upgrader (`kai-ray apply-crds`) and the
# Ray workers of ray.mode=kuberay all run it. How to build it: docs/deploy.md.
#
# Two stages: the first installs kai-ray and its dependencies into a virtual environment, the
# second copies only that environment (no compiler, no pip cache, no sources) onto a slim Python.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/kai-ray
WORKDIR /src
# The locked dependency set first (its own layer: it changes less often than the code), then what
# `pip install .` reads: the project file, the README it names, and the packages the image runs.
COPY requirements.lock ./
RUN /opt/kai-ray/bin/pip install -r requirements.lock
COPY pyproject.toml README.md ./
COPY kai_ray kai_ray
COPY pod_grouper pod_grouper
COPY placement placement
COPY coordinator coordinator
COPY shards shards
COPY k8s_adapter k8s_adapter
COPY devcluster devcluster
RUN /opt/kai-ray/bin/pip install --no-deps --no-build-isolation .

FROM ${PYTHON_IMAGE}
# KubeRay's probes on Ray pods run bash (in the base image) and wget.
RUN apt-get update \
 && apt-get install --yes --no-install-recommends wget \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 1000 kai-ray \
 && useradd --uid 1000 --gid 1000 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin kai-ray
COPY --from=build /opt/kai-ray /opt/kai-ray
# The CRDs the chart's pre-upgrade hook applies (`kai-ray apply-crds` reads this directory).
COPY helm/kai-ray/crds /opt/kai-ray/crds
ENV PATH=/opt/kai-ray/bin:$PATH \
    KAI_RAY_CRDS=/opt/kai-ray/crds \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RAY_USAGE_STATS_ENABLED=0
USER 1000:1000
WORKDIR /tmp
ENTRYPOINT ["kai-ray"]
CMD ["--help"]
