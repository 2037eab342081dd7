#!/usr/bin/env bash
# Measure two revisions of Nova against each other on this machine: each in its own git
# worktree, run alternately (so drift in the machine's speed hits both), ROUNDS rounds of
# bench_ops and bench_train (small, Nova and PyTorch eager). Prints where the outputs are.
#
#     bash benchmarks/compare_revisions.sh BASE_REV NEW_REV [ROUNDS]
#
# Compare the ratios (Nova vs numpy, PyTorch vs Nova) across revisions, not single times.
set -euo pipefail
base=${1:?base revision}; new=${2:?new revision}; rounds=${3:-3}
root=$(git rev-parse --show-toplevel)
py=${PYTHON:-python}
out=$(mktemp -d -t nova-compare-XXXXXX)
for name in base new; do
  rev=$([ $name = base ] && echo "$base" || echo "$new")
  git -C "$root" worktree add -q --detach "$out/$name" "$rev"
done
trap 'for n in base new; do git -C "$root" worktree remove --force "$out/$n"; done' EXIT
for round in $(seq "$rounds"); do
  for name in base new; do
    echo "[$name round $round] $(uptime)" | tee -a "$out/log"
    (cd "$out/$name" && PYTHONPATH="$out/$name" "$py" -m benchmarks.bench_ops --reps 10 \
        > "$out/ops_${name}_$round.txt" 2>&1)
    (cd "$out/$name" && PYTHONPATH="$out/$name" "$py" -m benchmarks.bench_train --preset small \
        --steps 20 --frameworks nova torch-eager --out "$out/train_${name}_$round" \
        > "$out/train_${name}_$round.txt" 2>&1)
  done
done
grep -H -E "vs numpy|chain|softmax|layer_norm|cross_entropy|replay" "$out"/ops_*.txt
grep -H -E "^\| small" "$out"/train_*.txt
echo "outputs in $out"
