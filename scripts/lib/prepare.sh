# Shared by the scripts that prepare what the tests need (setup.sh, the *-venv.sh scripts):
# Debian packages installed when missing, and Python virtual environments pinned to a
# requirements file. Sourced, not run; each function takes the calling script's name (TAG)
# for its messages.

# require_packages TAG PACKAGE...: installs the Debian packages that are missing when run as
# root; otherwise prints the apt command and exits 1.
require_packages() {
    local tag=$1 p
    shift
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "$tag: missing system packages. Run:" >&2
        echo "  sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "$tag: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# require_venv_module TAG: python3 with its venv module (Debian's python3-venv when missing).
require_venv_module() {
    python3 -m venv --help >/dev/null 2>&1 || require_packages "$1" python3-venv
}

# pinned_venv TAG VENV REQUIREMENTS [PIP_ARGS...]: VENV with REQUIREMENTS installed, rebuilt
# only when they changed since the last build (a copy of them is kept in the venv).
pinned_venv() {
    local tag=$1 venv=$2 requirements=$3
    shift 3
    local stamp="$venv/.requirements"
    if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
        echo "$tag: $venv is up to date"
        return 0
    fi
    require_venv_module "$tag"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" -r "$requirements"
    cp "$requirements" "$stamp"
    echo "$tag: $venv ready"
}
