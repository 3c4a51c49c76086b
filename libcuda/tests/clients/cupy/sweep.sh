#!/usr/bin/env bash
# CuPy's own tests on the built libcuda.so.1, three times: with CUB
# (CUPY_ACCELERATORS=cub), with no accelerator, and with CUB in reverse
# order, every module checked by spirv-val (PTXVK_SPIRV_VAL=1). A result
# that differs between the runs depends on the order of earlier work or on
# the accelerator (issue 24, item 3). Not part of scripts/test.sh: about 25
# minutes on lavapipe for the default selection.
#
#   libcuda/tests/clients/cupy/sweep.sh CUPY_TESTS_DIR [pytest node ids...]
#
# CUPY_TESTS_DIR: the tests/ folder of CuPy's source at the installed
# version (git clone -b v14.2.0 https://github.com/cupy/cupy; the wheel has
# no tests). Environment: PTXVK_CUPY_VENV (default /tmp/ptxvk-cupy-venv, as
# run.sh makes it), SWEEP_K (a pytest -k expression), SWEEP_OUT (default
# /tmp/ptxvk-cupy-sweep: one log per run, and ids.txt).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
tests="${1:?usage: sweep.sh CUPY_TESTS_DIR [pytest node ids...]}"
shift
venv="${PTXVK_CUPY_VENV:-/tmp/ptxvk-cupy-venv}"
out="${SWEEP_OUT:-/tmp/ptxvk-cupy-sweep}"
sel=("$@")
if [[ ${#sel[@]} -eq 0 ]]; then
    sel=(cupy_tests/math_tests/test_sumprod.py::TestSumprod
         cupy_tests/math_tests/test_sumprod.py::TestCumsum
         cupy_tests/sorting_tests/test_search.py::TestSearch
         cupy_tests/statistics_tests/test_meanvar.py::TestMeanVar)
fi
libdir="$("$root/libcuda/build-libcuda.sh")" || exit 1
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ -z "${VK_ICD_FILENAMES:-}" && -f /usr/share/vulkan/icd.d/lvp_icd.x86_64.json && -z "${PTXVK_DEVICE:-}" ]]; then
    export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
fi
export CUPY_COMPILE_WITH_PTX=1 PTXVK_SPIRV_VAL=1
mkdir -p "$out"
cd "$tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider --collect-only "${sel[@]}" -k "${SWEEP_K:-not huge}" 2>/dev/null \
    | grep "::" > "$out/ids.txt"
echo "$(wc -l < "$out/ids.txt") tests"
for run in cub none reverse; do
    acc=cub
    order=cat
    [[ $run == none ]] && acc=
    [[ $run == reverse ]] && order=tac
    mapfile -t ids < <($order "$out/ids.txt")
    start=$(date +%s)
    CUPY_ACCELERATORS=$acc "$venv/bin/python" -m pytest -q -p no:cacheprovider -rA -W ignore::DeprecationWarning \
        "${ids[@]}" > "$out/$run.log" 2>&1
    echo "$run: rc $? in $(( $(date +%s) - start )) s: $(tail -n 1 "$out/$run.log")"
    grep -E "^(PASSED|FAILED|ERROR) " "$out/$run.log" | sort > "$out/$run.outcomes"
done
for run in none reverse; do
    if ! diff -q "$out/cub.outcomes" "$out/$run.outcomes" > /dev/null; then
        echo "outcomes differ between cub and $run:"
        diff "$out/cub.outcomes" "$out/$run.outcomes"
        status=1
    fi
done
exit "${status:-0}"
