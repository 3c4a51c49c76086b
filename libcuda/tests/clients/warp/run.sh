#!/usr/bin/env bash
# NVIDIA Warp 1.19 (warp-lang: kernels compiled by its bundled NVRTC,
# loaded through cuGetProcAddress, CUB sorts and scans inside warp.so) on
# the built libcuda.so.1, running Warp's own test files from its wheel
# (warp/tests), CUDA device only (-k cuda_0). Its own virtual environment
# (about 400 MB; needs PyPI the first time). scripts/test.sh runs the
# selection below; lavapipe compiles each Warp module for seconds, and
# whole files take minutes to tens of minutes (geometry/test_volume.py:
# 23 minutes), so the rest runs from this command.
#
#   libcuda/tests/clients/warp/run.sh                 # the selection below
#   libcuda/tests/clients/warp/run.sh --all           # every test file, each in
#                                  # its own process with a time limit
#                                  # (PTXVK_WARP_FILE_TIMEOUT seconds, default
#                                  # 1800), a line per file and the totals
#   libcuda/tests/clients/warp/run.sh FILE... [pytest args...]
#                                  # FILE relative to warp/tests, e.g. test_utils.py
#
# Environment: PTXVK_WARP_VENV (default /tmp/ptxvk-warp-venv).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
venv="${PTXVK_WARP_VENV:-/tmp/ptxvk-warp-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
stamp="$venv/.ptxvk-requirements"
if ! cmp -s "$here/requirements.txt" "$stamp"; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
    cp "$here/requirements.txt" "$stamp"
fi
libdir="$("$root/libcuda/build-libcuda.sh")"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi
tests="$("$venv/bin/python" -c 'import os, warp.tests; print(os.path.dirname(warp.tests.__file__))')"
# The selection (scripts/test.sh runs it; about 2 minutes on lavapipe with
# empty caches): CUB's scans and radix sort through wp.utils (CUB's
# look-back scan needs the block order of docs/cooperative.md on lavapipe,
# and its 8- and 16-byte tile descriptors seen whole: the int64 vector scan
# was silently wrong in 2 of 5 runs before they were), NanoVDB volume
# stores and sampling, conditional graph nodes from stream capture, and
# APIC graphs saved and replayed (their inputs are set by copies whose
# declared host side is a device array: zeros before those were seen through).
selection=(
    "$tests/test_utils.py::TestUtils::test_array_scan_cuda_0"
    "$tests/test_utils.py::TestUtils::test_array_scan_vector_cuda_0"
    "$tests/test_utils.py::TestUtils::test_radix_sort_pairs_cuda_0"
    "$tests/geometry/test_volume.py::TestVolume::test_volume_store_cuda_0"
    "$tests/geometry/test_volume.py::TestVolume::test_volume_sample_linear_f_cuda_0"
    "$tests/cuda/test_conditional_captures.py"
    "$tests/test_apic_load_from_bytes.py"
)
args=()
selected=0
if [[ "${1:-}" == --all ]]; then
    shift
    # One pytest process per file: a file that crashes the process, leaves
    # the context failed or runs past the limit costs only its own tests.
    cd /tmp
    limit="${PTXVK_WARP_FILE_TIMEOUT:-1800}"
    log="$(mktemp -d /tmp/ptxvk-warp-all.XXXXXX)"
    echo "== NVIDIA Warp, every test file (logs in $log) =="
    status=0
    while IFS= read -r f; do
        name="${f//\//__}"
        start=$SECONDS
        rc=0
        # This script on the one file (which runs its printf tests with -s);
        # timeout signals the whole process group.
        timeout -k 30 "$limit" "$here/run.sh" "$f" "$@" </dev/null >"$log/$name.log" 2>&1 || rc=$?
        case $rc in
            0 | 5) ;; # 5: no CUDA tests in the file
            124 | 137) status=1; echo "$f: stopped after ${limit} s" ;;
            *) status=1 ;;
        esac
        summary="$(grep -E '^[0-9]+ (passed|failed|skipped|deselected)|^=+ .*(passed|failed|deselected).* =+$' "$log/$name.log" | paste -sd';' || true)"
        echo "$f ($((SECONDS - start)) s): ${summary:-exit status $rc}" | tee -a "$log/summary.txt"
    done < <(cd "$tests" && find . -name 'test_*.py' | sed 's|^\./||' | sort)
    echo "== totals =="
    grep -oE '[0-9]+ (passed|failed|skipped|errors?|subtests passed)' "$log/summary.txt" |
        awk '{k = $2; if (NF > 2) k = k " " $3; n[k] += $1} END {for (k in n) print n[k], k}' | sort -k2
    exit "$status"
elif [[ $# -gt 0 && -e "$tests/$1" ]]; then
    while [[ $# -gt 0 && -e "$tests/$1" ]]; do
        args+=("$tests/$1")
        shift
    done
else
    args=("${selection[@]}")
    selected=1
fi
cd /tmp
echo "== NVIDIA Warp =="
# test_print runs on its own with -s: Warp's StdOutCapture redirects the
# file descriptor behind sys.stdout, which under pytest's capture is
# pytest's file, not fd 1, where the driver writes kernel printf output
# (ours; NVIDIA's too, we expect), so it fails under capture. Everything
# else runs under pytest's capture: with -s, pytest's own progress marks
# (a `u` per passing subtest) land in Warp's captured output and fail the
# tests that expect none (test_hash_grid's dtype validation). The other
# tests that read kernel printf output through StdOutCapture,
# test_verify_fp's NaN/Inf reports and test_sparse's max_new_nnz warning,
# run with -s too.
sparse_print="$tests/test_sparse.py::TestSparse::test_bsr_mm_max_new_nnz_cuda_0"
print_args=()
other_args=()
other_select=cuda_0
for a in "${args[@]}"; do
    if [[ "$a" == *test_print.py* || "$a" == *test_verify_fp.py* ]]; then
        print_args+=("$a")
    elif [[ "$a" == "$tests/test_sparse.py" ]]; then
        other_args+=("$a")
        other_select="cuda_0 and not test_bsr_mm_max_new_nnz"
        print_args+=("$sparse_print")
    else
        other_args+=("$a")
    fi
done
rc=0
if ((${#other_args[@]})); then
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -k "$other_select" "${other_args[@]}" "$@" || rc=$?
fi
if ((${#print_args[@]})); then
    "$venv/bin/python" -m pytest -q -s -p no:cacheprovider -k cuda_0 "${print_args[@]}" "$@" || rc=$?
fi
if [[ $selected == 1 ]]; then
    # Warp's tiled GMRES least squares (a warp-synchronous write after read
    # of shared memory; silently wrong on lavapipe with blocks of 16 and 32
    # threads before emit/lockstep.rs made such stores lock-step points):
    # 9 s here, where test_linear_solvers.py's 6 GMRES tests take 150 s.
    "$venv/bin/python" "$here/gmres_least_squares.py" || rc=$?
fi
exit "$rc"
