# Sourced by the client runners that have a virtual environment of their own
# (cupy/, taichi/, torch/ run.sh): `client_venv VENV REQUIREMENTS` makes the
# environment VENV if needed, installs REQUIREMENTS when they changed since
# the last install (needs PyPI then), builds libcuda.so.1 and puts it first
# on LD_LIBRARY_PATH, and pins lavapipe when no GPU is chosen. Sets `venv`.
client_venv() {
    venv="$1"
    local requirements="$2"
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
    if [[ ! -x "$venv/bin/python" ]]; then
        python3 -m venv "$venv"
    fi
    local stamp="$venv/.ptxvk-requirements"
    if ! cmp -s "$requirements" "$stamp"; then
        "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements" >&2
        cp "$requirements" "$stamp"
    fi
    local libdir
    libdir="$("$root/libcuda/build-libcuda.sh")"
    export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
        export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
    fi
}
