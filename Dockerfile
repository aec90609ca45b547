# The fedspread images (not built by the tests), from one Dockerfile with two targets:
#
#   docker build --target coordinator -t registry.example.com/fedspread:0.1.0 .
#   docker build --target agent -t registry.example.com/fedspread-agent:0.1.0 .
#
# `coordinator`: `fedspread coordinator` (deploy/coordinator/), and also the Ray head and workers
# of deploy/coordinator/raycluster.yaml — the placement shard actors are fedspread code the Ray
# workers must import, and Ray Client only accepts a cluster with the same Ray and Python versions.
# `agent`: `fedspread agent` (deploy/agent/), without Ray (about 240 MB the agent never uses).
FROM python:3.11-slim AS source
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY federation federation
COPY agents agents

FROM python:3.11-slim AS agent
COPY --from=source /src /src
# constraints.txt: the exact versions `make test` ran with (python -m federation.pins).
RUN pip install --no-cache-dir -c /src/constraints.txt "/src[agent]" && rm -rf /src
# The manifests run as this uid (runAsNonRoot).
RUN useradd --uid 65532 --user-group --create-home --home-dir /home/fedspread fedspread
USER 65532:65532
WORKDIR /home/fedspread
ENTRYPOINT ["fedspread"]

FROM python:3.11-slim AS coordinator
# Equal to `rayVersion` in deploy/coordinator/raycluster.yaml (a unit test checks both, and that
# the version satisfies pyproject's ray requirement). [default]: the dashboard KubeRay's probes
# ask; [client]: the Ray Client server on the head (ray://...:10001).
ARG RAY_VERSION=2.60.0
# KubeRay's default readiness/liveness probes run wget inside the Ray containers.
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*
COPY --from=source /src /src
# The pins cover fedspread[coordinator]; what Ray's [default,client] extras add is Ray's to pin.
RUN pip install --no-cache-dir -c /src/constraints.txt "/src[coordinator]" "ray[default,client]==${RAY_VERSION}" \
    && rm -rf /src
# The manifests run as this uid (runAsNonRoot); HOME is writable for Ray's session files.
RUN useradd --uid 65532 --user-group --create-home --home-dir /home/fedspread fedspread
USER 65532:65532
WORKDIR /home/fedspread
ENTRYPOINT ["fedspread"]
