#!/usr/bin/env bash
# The lock world's learning-rate screen (docs/plans/tiny-lock.md, section 5): the five
# rules at each rate of the grid, seeds 0 and 1, on the validation suite, each rate in
# its own folder holding a copy of the prepared world. Resumable: re-running skips what
# is done. Then: python studies/lock/select_lr.py SCREEN
#
#   bash studies/lock/screen.sh WORLD SCREEN     # WORLD: a prepared tiny-lock folder
set -euo pipefail
world=${1:?a prepared lock world (ictrepro prepare --preset tiny-lock-screen-2e-4 --out DIR)}
screen=${2:?the screen folder}
for label in 2e-4 6e-5 2e-5; do
    out="$screen/$label"
    if [ ! -f "$out/prepare.json" ]; then
        mkdir -p "$out"
        for item in prepare.json data base_model sft_log.jsonl calibration.json; do
            [ -e "$world/$item" ] && cp -r "$world/$item" "$out/"
        done
    fi
    ictrepro reproduce --preset "tiny-lock-screen-$label" --out "$out" --jobs 2 --quiet
done
