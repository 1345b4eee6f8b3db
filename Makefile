# The container image, built and smoke-tested with podman from a base image made here with
# debootstrap (no registry needed). None of this is part of the normal test run (.ci/run).
#   make image-base    debootstrap a minimal Debian and import it as $(BASE_IMAGE) (needs root)
#   make image         build $(IMAGE) from docker/Dockerfile on that base (makes the base if missing)
#   make image-smoke   run the image and pass docker/smoke.sh against it; the container is removed
#   make image-clean   remove both images and dangling build stages
# With Docker and a registry instead: docker build -f docker/Dockerfile -t sandbox-desktop .
# (Docker here too: make image-smoke ENGINE=docker BUILD_FLAGS= SMOKE_FLAGS="-p 127.0.0.1:24680:2468 \
#  -p 127.0.0.1:59480-59484:59480-59484/udp -e SANDBOX_DESKTOP_WEBRTC_PUBLIC_ADDRESS=127.0.0.1")

ENGINE      ?= podman
IMAGE       ?= localhost/sandbox-desktop:latest
BASE_IMAGE  ?= localhost/sandbox-desktop-base:bookworm
PYTHON      ?= python3

# The index pip uses on this machine (empty: PyPI) and the CA bundle it trusts (for TLS-intercepting
# proxies), passed to the build so that it installs the way pip does here. The bundle goes in as a
# build secret, so it never lands in a layer.
PIP_INDEX   ?= $(or $(PIP_INDEX_URL),$(shell $(PYTHON) -m pip config get global.index-url 2>/dev/null))
PIP_CA      ?= $(or $(PIP_CERT),$(shell $(PYTHON) -m pip config get global.cert 2>/dev/null))
comma       := ,
PIP_FLAGS   := --build-arg PIP_INDEX=$(PIP_INDEX) $(if $(PIP_CA),--secret id=pip-cert$(comma)src=$(PIP_CA))

# Why these flags (each can be overridden, e.g. `make image ENGINE_FLAGS=`):
# - runc (when installed), not crun: crun refuses hosts that mount cgroup v1 and v2 side by side
#   ("cgroups in hybrid mode not supported").
# - explicit ulimits: podman asks for limits above this host's hard limits by default, and raising a
#   limit needs CAP_SYS_RESOURCE, which sandboxes and unprivileged CI jobs lack.
ENGINE_FLAGS ?= $(if $(filter podman,$(notdir $(ENGINE))),$(if $(shell command -v runc),--runtime runc))
NOFILE      := $(patsubst unlimited,-1,$(shell ulimit -Hn))
ULIMIT_FLAGS ?= --ulimit nofile=$(NOFILE):$(NOFILE) --ulimit nproc=4096:4096
# The docker image format, because the OCI format has no HEALTHCHECK. Build steps share the host's
# network: they need the package mirrors, and a bridge network needs CNI/netavark plugins and
# firewall rules that minimal hosts do not have.
BUILD_FLAGS ?= --format docker --network host $(ULIMIT_FLAGS)
# The smoke container gets a network namespace of its own (slirp4netns: no bridge or firewall rules)
# with its ports published on the host's loopback only; its X display stays private to it too. The
# live view's UDP range is published 1:1 (same ports on both sides) and advertised at 127.0.0.1;
# a viewer on this side needs a Python with aiortc (VIEWER_PYTHON), else smoke.sh skips that check.
SMOKE_PORT  ?= 24680
SMOKE_UDP   ?= 59480-59484
SMOKE_SIZE  ?= 1280x800
SMOKE_NAME  ?= sandbox-desktop-smoke
SMOKE_FLAGS ?= --network slirp4netns:allow_host_loopback=false -p 127.0.0.1:$(SMOKE_PORT):2468 \
               -p 127.0.0.1:$(SMOKE_UDP):$(SMOKE_UDP)/udp -e SANDBOX_DESKTOP_WEBRTC_PUBLIC_ADDRESS=127.0.0.1 \
               $(ULIMIT_FLAGS)
VIEWER_PYTHON ?= $(PYTHON)

.PHONY: image-base image image-smoke image-clean

image-base:
	ENGINE=$(ENGINE) bash docker/make-base.sh $(BASE_IMAGE)

image:
	@$(ENGINE) image inspect $(BASE_IMAGE) >/dev/null 2>&1 || $(MAKE) --no-print-directory image-base
	$(ENGINE) $(ENGINE_FLAGS) build $(BUILD_FLAGS) -f docker/Dockerfile -t $(IMAGE) \
	    --build-arg BASE=$(BASE_IMAGE) $(PIP_FLAGS) .
	@$(ENGINE) image ls $(IMAGE)

image-smoke: image
	@set -eu; \
	token=$$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n'); \
	echo "==> without a token the container must refuse to start"; \
	if out=$$($(ENGINE) $(ENGINE_FLAGS) run --rm --no-healthcheck $(ULIMIT_FLAGS) --network none $(IMAGE) 2>&1); then \
	    echo "FAIL: started without a token"; exit 1; fi; \
	echo "$$out" | grep -q SANDBOX_DESKTOP_TOKEN || { echo "FAIL: no clear message: $$out"; exit 1; }; \
	echo "ok   refused: $$(echo "$$out" | head -n 1)"; \
	$(ENGINE) $(ENGINE_FLAGS) rm -f $(SMOKE_NAME) >/dev/null 2>&1 || true; \
	trap '$(ENGINE) $(ENGINE_FLAGS) rm -f $(SMOKE_NAME) >/dev/null 2>&1 || true' EXIT; \
	echo "==> $(ENGINE) run $(IMAGE) on 127.0.0.1:$(SMOKE_PORT), live view on 127.0.0.1:$(SMOKE_UDP)/udp"; \
	: "podman without systemd says it cannot schedule the health check timer; smoke.sh runs the check"; \
	t0=$$(date +%s%N); \
	$(ENGINE) $(ENGINE_FLAGS) run -d --name $(SMOKE_NAME) $(SMOKE_FLAGS) -e SANDBOX_DESKTOP_TOKEN=$$token \
	    $(IMAGE) --desktop-size $(SMOKE_SIZE) >/dev/null; \
	SANDBOX_DESKTOP_TOKEN=$$token SMOKE_T0=$$t0 ENGINE="$(ENGINE)" SMOKE_WEBRTC_PORTS=$(SMOKE_UDP) \
	    VIEWER_PYTHON="$(VIEWER_PYTHON)" bash docker/smoke.sh http://127.0.0.1:$(SMOKE_PORT) $(SMOKE_NAME) $(SMOKE_SIZE)

# Also prunes dangling images: the untagged build stages and replaced images that builds leave behind.
image-clean:
	-$(ENGINE) $(ENGINE_FLAGS) rm -f $(SMOKE_NAME)
	-$(ENGINE) $(ENGINE_FLAGS) rmi $(IMAGE) $(BASE_IMAGE)
	-$(ENGINE) image prune -f
