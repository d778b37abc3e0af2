#!/bin/sh
# Instructions of Sigma matching alone (callgrind), whole SigmaHQ set over Windows records in
# the pipeline's layout: deterministic where wall-clock rounds vary. Needs valgrind and
# WATCHPOST_SIGMAHQ_FULL (and optionally WATCHPOST_EVTX); see benches/examples/sigma_instructions.rs.
# usage: benches/scripts/sigma_instructions.sh [PASSES]   (prints the total, keeps the profile)
set -eu
passes=${1:-2}
cargo build --release -p watchpost-benches --example sigma_instructions
target=${CARGO_TARGET_DIR:-target}
out=$(mktemp /tmp/sigma-instructions.XXXXXX)
valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
    --toggle-collect='*match_one*' "$target/release/examples/sigma_instructions" "$passes"
callgrind_annotate "$out" | grep "PROGRAM TOTALS"
echo "profile: $out (callgrind_annotate --inclusive=yes $out)"
