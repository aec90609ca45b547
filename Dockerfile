# The fedspread image (not built by the tests): `fedspread coordinator` and `fedspread agent`
# (deploy/), and also the Ray head and workers of deploy/coordinator/raycluster.yaml. The Ray
# nodes run this image because the placement shard actors are fedspread code the Ray workers
# must import, and Ray Client only accepts a cluster with the same Ray and Python versions.
#
#   docker build -t registry.example.com/fedspread:0.1.0 .
FROM python:3.11-slim

# Equal to `rayVersion` in deploy/coordinator/raycluster.yaml (a unit test checks both, and that
# the version satisfies pyproject's ray requirement). [default]: the dashboard KubeRay's probes
# ask; [client]: the Ray Client server on the head (ray://...:10001).
ARG RAY_VERSION=2.60.0

# KubeRay's default readiness/liveness probes run wget inside the Ray containers.
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md ./
COPY federation federation
COPY agents agents
RUN pip install --no-cache-dir . "ray[default,client]==${RAY_VERSION}" \
    && rm -rf /src

# The manifests run as this uid (runAsNonRoot); HOME is writable for Ray's session files.
RUN useradd --uid 65532 --user-group --create-home --home-dir /home/fedspread fedspread
USER 65532:65532
WORKDIR /home/fedspread
ENTRYPOINT ["fedspread"]
