# The platform image: the `kernelarc` command (campaigns, eval, export) with the MLflow client and
# the Docker SDK, for running campaigns whose candidates go to the sandbox image
# (sandbox/Dockerfile) through the host's Docker engine.
#
#   docker build -t kernelarc:latest .
#   docker run --rm \
#     -v /var/run/docker.sock:/var/run/docker.sock \
#     -v /srv/kernelarc:/srv/kernelarc -w /srv/kernelarc \
#     kernelarc:latest campaign sandbox=docker sandbox.docker.work_root=/srv/kernelarc/tmp \
#       device=cuda workloads=workload_gpu.jsonl
#
# Bind mounts of the sandbox containers are resolved on the engine's host, so every path the
# sandbox mounts (sandbox.docker.work_root, the run dir's problem copy) must live under a dir
# mounted at the same path on both sides (/srv/kernelarc above). This image runs no kernels:
# torch is the CPU build (only the local sandbox would use it).
FROM python:3.12-slim

ARG TORCH_VERSION=2.13.0
ENV PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MLFLOW_DISABLE_TELEMETRY=true

RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==${TORCH_VERSION}"

COPY pyproject.toml README.md /src/
COPY kernelarc /src/kernelarc
COPY conf /src/conf
COPY leaderboard /src/leaderboard
# mlflow pulls in the docker SDK; it is named here because DockerSandbox needs it.
RUN pip install /src "docker>=7.1" && rm -rf /src && kernelarc --version

ENTRYPOINT ["kernelarc"]
CMD ["--help"]
