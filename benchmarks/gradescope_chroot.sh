#!/usr/bin/env bash
# setup.sh and run_autograder of `course-grade gradescope`'s bundle in a fresh Ubuntu root filesystem,
# the way Gradescope builds its image: the bundle unpacked in /autograder/source, setup.sh run there as
# root, run_autograder copied to /autograder/run_autograder and run on a submission in
# /autograder/submission (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
#
#     sudo benchmarks/gradescope_chroot.sh [ROOTFS]        # as root; minutes: a dev check, not in `make test`
#
# SUITE=jammy (Ubuntu 22.04, Gradescope's default base image: Python 3.10); SUITE=noble tries 24.04.
# Needs debootstrap (apt-get install debootstrap) and the network to archive.ubuntu.com and PyPI. The
# rootfs's sources.list is the ubuntu Docker image's (main restricted universe multiverse). debootstrap
# runs with --no-check-gpg where no Ubuntu keyring is installed (Debian has none); apt inside then checks
# signatures with the ubuntu-keyring that debootstrap installed. Prints each step's seconds and the
# submission's results.json; the rootfs is kept (rm -rf it after).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
ROOTFS="${1:-/tmp/gradescope-rootfs}"
SUITE="${SUITE:-jammy}"
MIRROR="${MIRROR:-http://archive.ubuntu.com/ubuntu}"
SUBMISSION="${SUBMISSION:-$REPO/examples/submissions/reference/l14-04-model-memory}"
PY="${PYTHON:-$REPO/.venv/bin/python}"
step() { echo "== $(date +%T) $*"; }
t0=$(date +%s)

[ "$(id -u)" = 0 ] || { echo "run as root (chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "apt-get install debootstrap" >&2; exit 2; }
cleanup() { for m in dev/pts dev proc sys; do umount -l "$ROOTFS/$m" 2>/dev/null || true; done; }
trap cleanup EXIT

if [ ! -x "$ROOTFS/usr/bin/apt-get" ]; then
    step "debootstrap $SUITE (minbase) into $ROOTFS"
    check=--no-check-gpg
    [ -f /usr/share/keyrings/ubuntu-archive-keyring.gpg ] && check=--keyring=/usr/share/keyrings/ubuntu-archive-keyring.gpg
    script=()   # an Ubuntu release newer than this debootstrap knows is built by its generic Ubuntu script
    [ -e "/usr/share/debootstrap/scripts/$SUITE" ] || script=(/usr/share/debootstrap/scripts/gutsy)
    debootstrap --variant=minbase "$check" "$SUITE" "$ROOTFS" "$MIRROR" "${script[@]}" >"$ROOTFS.debootstrap.log" 2>&1 \
        || { tail -20 "$ROOTFS.debootstrap.log"; exit 1; }
fi
t1=$(date +%s)
cat >"$ROOTFS/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main restricted universe multiverse
deb $MIRROR $SUITE-updates main restricted universe multiverse
deb $MIRROR $SUITE-security main restricted universe multiverse
EOF
cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
# Where this machine reaches PyPI through a TLS-inspecting proxy, pip needs its CA bundle (PIP_CERT or
# pip's `cert` setting here); Gradescope's builders need nothing of the kind, and setup.sh is unchanged.
HOST_CERT="${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}"
if [ -n "$HOST_CERT" ] && [ -f "$HOST_CERT" ]; then
    mkdir -p "$ROOTFS/etc/ssl" && cp "$HOST_CERT" "$ROOTFS/etc/ssl/host-proxy-ca.crt"
    printf '[global]\ncert = /etc/ssl/host-proxy-ca.crt\n' >"$ROOTFS/etc/pip.conf"
    echo "pip in the rootfs trusts $HOST_CERT (this machine's proxy), through /etc/pip.conf"
fi
mount -t proc proc "$ROOTFS/proc"; mount --bind /sys "$ROOTFS/sys"
mount --bind /dev "$ROOTFS/dev"; mount --bind /dev/pts "$ROOTFS/dev/pts"

step "the bundle (course-grade gradescope), unpacked in /autograder/source"
rm -rf "$ROOTFS/autograder"
mkdir -p "$ROOTFS/autograder/source" "$ROOTFS/autograder/results" "$ROOTFS/autograder/submission"
(cd "$REPO" && "$PY" -m autograder gradescope --out "$ROOTFS/autograder/bundle.zip")
"$PY" - "$ROOTFS/autograder/bundle.zip" "$ROOTFS/autograder/source" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as zf:
    for info in zf.infolist():
        target = os.path.join(sys.argv[2], info.filename)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(zf.read(info))
        os.chmod(target, (info.external_attr >> 16) & 0o777)
EOF
echo "the base image's python3 before setup.sh: $(chroot "$ROOTFS" sh -c 'python3 -V 2>&1 || echo none')"

step "setup.sh, as Gradescope runs it (root, in /autograder/source)"
t2=$(date +%s)
chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    bash -c 'cd /autograder/source && ./setup.sh'
t3=$(date +%s)
echo "python in the image: $(chroot "$ROOTFS" /autograder/venv/bin/python -V)"

step "run_autograder on $(basename "$(dirname "$SUBMISSION")")"
cp "$ROOTFS/autograder/source/run_autograder" "$ROOTFS/autograder/run_autograder"
cp "$SUBMISSION"/* "$ROOTFS/autograder/submission/"
echo '{"users": [{"email": "reference@example.edu"}]}' >"$ROOTFS/autograder/submission_metadata.json"
chroot "$ROOTFS" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    bash -c 'cd /autograder && ./run_autograder' | tail -5
t4=$(date +%s)
"$PY" - "$ROOTFS/autograder/results/results.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
tests = r["tests"]
print("results.json: score", r["score"], "=", sum(t.get("score", 0) for t in tests), "of the tests';",
      "status", r["extra_data"]["status"], ";", [t["name"] for t in tests if "score" not in t], "pending")
print("output:", r["output"].replace("\n", " | ")[:400])
EOF
echo "seconds: debootstrap $((t1 - t0)), setup.sh $((t3 - t2)), run_autograder $((t4 - t3)); rootfs $(du -shx "$ROOTFS" | cut -f1)"
