#!/usr/bin/env bash
# Builds a minimal Debian base image with debootstrap and imports it as a local image, for machines
# that cannot pull debian:bookworm-slim from a registry:
#   sudo bash docker/make-base.sh [IMAGE]        (default localhost/sandbox-desktop-base:bookworm)
# The packages come from the Debian mirror this machine's apt already uses (read from
# /etc/apt/sources.list and /etc/apt/sources.list.d/), so the base works wherever apt does; set
# MIRROR (and SECURITY_MIRROR) to override. SUITE picks the release (default bookworm); ENGINE the
# image tool (default podman; docker works too).
set -euo pipefail

image=${1:-localhost/sandbox-desktop-base:bookworm}
suite=${SUITE:-bookworm}
engine=${ENGINE:-podman}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { echo "make-base.sh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "debootstrap needs root: run this as root (or with sudo)"
command -v debootstrap >/dev/null || die "debootstrap is not installed: apt-get install debootstrap"
command -v "$engine" >/dev/null || die "$engine is not installed: apt-get install $engine (or set ENGINE)"

apt_sources() {
  # Prints "URI SUITE" for every enabled `deb` source, in one-line and deb822 formats alike.
  local file
  for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$file" ] || continue
    awk '$1 == "deb" {
      i = 2
      if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
      print $i, $(i + 1)
    }' "$file"
  done
  for file in /etc/apt/sources.list.d/*.sources; do
    [ -f "$file" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
    {
      types = ""; uris = ""; suites = ""; enabled = "yes"
      for (j = 1; j <= NF; j++) {
        if ($j ~ /^[ \t]*#/ || $j !~ /:/) continue
        key = tolower(substr($j, 1, index($j, ":") - 1)); value = substr($j, index($j, ":") + 1)
        if (key == "types") types = value; else if (key == "uris") uris = value
        else if (key == "suites") suites = value; else if (key == "enabled") enabled = tolower(value)
      }
      if (enabled ~ /no/ || (" " types " ") !~ /[ \t]deb[ \t]/) next
      nu = split(uris, u, /[ \t]+/); ns = split(suites, s, /[ \t]+/)
      for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++) if (u[a] != "" && s[b] != "") print u[a], s[b]
    }' "$file"
  done
}

mirror_for() {
  # The first source that serves suite $1, without a trailing slash.
  apt_sources | awk -v want="$1" '$2 == want { sub(/\/+$/, "", $1); print $1; exit }'
}

mirror=${MIRROR:-$(mirror_for "$suite")}
security=${SECURITY_MIRROR:-$(mirror_for "$suite-security")}
[ -n "$mirror" ] || die "no apt source for '$suite' in /etc/apt/sources.list{,.d}: set MIRROR=<Debian mirror URL>"

root=$(mktemp -d /var/tmp/sandbox-desktop-base.XXXXXX)
trap 'rm -rf --one-file-system "$root"' EXIT

include=""
case "$mirror" in https:*) include="--include=ca-certificates" ;; esac
say "debootstrap --variant=minbase $suite (from the mirror apt uses here)"
debootstrap --variant=minbase $include "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -n 30 "$root.log" >&2; rm -f "$root.log"; die "debootstrap failed (log above)"; }
rm -f "$root.log"

say "configuring apt and trimming the root filesystem"
{
  echo "deb $mirror $suite main"
  echo "deb $mirror $suite-updates main"
  [ -z "$security" ] || echo "deb $security $suite-security main"
} >"$root/etc/apt/sources.list"

# Keep the host's date checks: a mirror that serves a dated snapshot fails them otherwise.
{
  echo "# Written by docker/make-base.sh from this machine's apt configuration."
  apt-config dump Acquire::Check-Valid-Until Acquire::Check-Date | grep -E '^Acquire::Check-(Valid-Until|Date) ' || true
  # As in Debian's official images: no translations, no binary caches, no cached .debs.
  echo 'Acquire::Languages "none";'
  echo 'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";'
  echo 'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };'
} >"$root/etc/apt/apt.conf.d/90sandbox-desktop-base"

# Documentation never helps a server image; later package installs skip it too (copyrights stay).
cat >"$root/etc/dpkg/dpkg.cfg.d/90sandbox-desktop-base" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/man" "$root/usr/share/info" -mindepth 1 -delete 2>/dev/null || true
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
       "$root"/var/log/* "$root"/tmp/* "$root"/root/.cache

say "importing $image"
tar --numeric-owner --xattrs -C "$root" -c . \
  | "$engine" import --change 'CMD ["bash"]' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$image" >/dev/null
"$engine" image ls "$image"
