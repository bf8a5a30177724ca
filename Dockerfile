# The reprobox image: a base pinned by digest, a hash-locked Python stack, the deterministic
# environment, a non-root user, and the reprobox guest as the entrypoint.
#
# reprobox builds it from an in-memory context (reprobox/image/) and tags it with the hash of that
# context and the build args, so an unchanged job reuses its image. `docker build .` works too.
#
# Build args:
#   BASE_IMAGE          the base; its python3 is used when it has one (with venv), else apt installs it
#   LOCK                the hash-locked requirements inside the context (env/requirements-cuda.lock or
#                       env/requirements-cpu.lock)
#   WHEELHOUSE          "wheelhouse" when the context's wheelhouse/ directory holds every locked wheel:
#                       pip then installs from it alone (--no-index), hashes still checked
#   SOURCE_DATE_EPOCH   the mtime of every file the install writes, so a rebuild gives the same layers
#
# This is the shared image every job starts from. A job's own packages (image.requirements) go into one
# more layer on top of it, which reprobox/image/_extras.py renders: jobs never reinstall this stack.

# CUDA 13.0.3 + cuDNN runtime on Ubuntu 24.04, matching torch 2.13.0's cuda-toolkit==13.0.3 pin, by tag
# and by the digest public projects pin for this tag (its linux/amd64 manifest is published as
# sha256:af851538a2bb05f587f27b660d61de3643d964e75ef5c04f4086ff2b36f2a12a). Where no registry is
# reachable, build the offline Debian base with scripts/build-offline-base.sh and pass
# BASE_IMAGE=reprobox/offline-base:bookworm.
ARG BASE_IMAGE=nvidia/cuda:13.0.3-cudnn-runtime-ubuntu24.04@sha256:14f6d08d1cd4a96effbfe3101d0b56326f552c199d05e4979ee0bd616df5811b

FROM ${BASE_IMAGE} AS runtime
SHELL ["/bin/sh", "-eu", "-c"]
# Python from the base if it has python3 with venv, else from the distribution (the CUDA base has none).
# The user is written directly into passwd/group: useradd would stamp today's date into /etc/shadow.
RUN if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv; \
        rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log; \
    fi; \
    grep -q '^reprobox:' /etc/group || echo 'reprobox:x:10001:' >>/etc/group; \
    grep -q '^reprobox:' /etc/passwd || echo 'reprobox:x:10001:10001:reprobox:/tmp:/usr/sbin/nologin' >>/etc/passwd

FROM runtime AS builder
ARG LOCK=env/requirements-cuda.lock
ARG WHEELHOUSE=
ARG SOURCE_DATE_EPOCH=946684800
COPY env/ /build/env/
# "Dockerfile wheelhouse*" always matches something, so this works with or without the directory.
COPY Dockerfile wheelhouse* /build/wheelhouse/
# Installed files depend only on the locked wheels: no caches, and no timestamp-based bytecode. The
# bytecode is compiled once with hash-based invalidation (no mtimes inside, byte-identical across builds)
# so imports in the read-only container do not recompile torch every run (~3-5 s each time otherwise).
# The venv moves under /build/layer/ with every mtime set to SOURCE_DATE_EPOCH, its parents included, so
# the layer the next stage copies is the same bytes whenever the same wheels are installed. reprobox
# removes this stage's image after the build: its wheelhouse copy is nobody's to keep.
RUN python3 -m venv /opt/venv; \
    source_args=""; \
    if [ -n "${WHEELHOUSE}" ]; then source_args="--no-index --find-links /build/wheelhouse"; fi; \
    PYTHONDONTWRITEBYTECODE=1 /opt/venv/bin/python -m pip install \
        --require-hashes --only-binary=:all: --no-compile --no-cache-dir --disable-pip-version-check \
        --no-warn-script-location ${source_args} --requirement "/build/${LOCK}"; \
    PYTHONDONTWRITEBYTECODE=1 /opt/venv/bin/python -m pip check --disable-pip-version-check; \
    find /opt/venv -name __pycache__ -prune -exec rm -rf {} +; \
    PYTHONHASHSEED=0 /opt/venv/bin/python -B -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv/lib \
        >/dev/null || true; \
    mkdir -p /build/layer/opt; \
    mv /opt/venv /build/layer/opt/venv; \
    find /build/layer -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +

FROM runtime
ARG SOURCE_DATE_EPOCH=946684800
COPY --from=builder /build/layer/ /
COPY reprobox/ /opt/reprobox/reprobox/
# The package is found through a .pth file: no build step, no generated metadata.
# /reprobox/runs belongs to the job user, so a named volume mounted there (docker compose) is writable.
RUN install -d -o 10001 -g 10001 /reprobox/runs; \
    purelib="$(/opt/venv/bin/python -B -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
    echo /opt/reprobox >"${purelib}/reprobox.pth"; \
    find /opt/reprobox -name __pycache__ -prune -exec rm -rf {} +; \
    PYTHONHASHSEED=0 /opt/venv/bin/python -B -m compileall -q --invalidation-mode unchecked-hash /opt/reprobox; \
    touch -d "@${SOURCE_DATE_EPOCH}" "${purelib}"; \
    find /reprobox /opt/reprobox "${purelib}/reprobox.pth" -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +
ENV PATH=/opt/venv/bin:${PATH} \
    VIRTUAL_ENV=/opt/venv
# The deterministic environment: exactly env/deterministic.env (tests/unit/test_image.py checks it).
ENV PYTHONHASHSEED=0 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CUBLAS_WORKSPACE_CONFIG=:4096:8 \
    NVTE_ALLOW_NONDETERMINISTIC_ALGO=0 \
    CUDA_DEVICE_ORDER=PCI_BUS_ID \
    TZ=UTC \
    LANG=C.UTF-8 \
    LC_ALL=C.UTF-8
LABEL io.reprobox.image="reprobox" \
    io.reprobox.user="10001:10001" \
    io.reprobox.python="/opt/venv/bin/python3"
USER 10001:10001
WORKDIR /reprobox/code
ENTRYPOINT ["/opt/venv/bin/python3", "-m", "reprobox.guest", "--"]
CMD ["python3", "--version"]
