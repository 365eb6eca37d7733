#!/usr/bin/env bash
# Prints, for every trace and load, the default gssh policy against EASY
# backfill (fifo-backfill) of the same gssh sim run: mean and max wait,
# fairness across waiting users, and whether gssh meets the goal (mean at
# most 0.9x EASY's, max wait and fairness at least as good).
#
#   bash bench/matrix.sh                 # ITP and Philly, loads 1.0 and 1.3
#   ALIBABA=path/alibaba-v2023-default.norm.csv bash bench/matrix.sh
#   LOADS="0.8 1.0 1.3" POLICIES=gssh,fairshare,fifo-backfill bash bench/matrix.sh
#
# Needs bin/gssh (make) and jq. The Alibaba trace is not in the repository
# (its terms allow research use only): give its path to include it.
set -euo pipefail
cd "$(dirname "$0")/.."
GSSH=${GSSH:-bin/gssh}
LOADS=${LOADS:-1.0 1.3}
POLICIES=${POLICIES:-gssh,fifo-backfill}
T=sim/testdata
cells=(
  "philly|$T/philly-pollux-20171021-7d.norm.csv|32x8xV100-32G|--users-from $T/philly-pollux-20171021-7d.teams.csv:cluster"
  "itp|$T/itp-cluster05.norm.csv|2x8xV100-32G|--users 8"
)
if [[ -n ${ALIBABA:-} ]]; then
  cells+=("alibaba|$ALIBABA|4x8xG2-16G|--users 8")
fi
echo "| trace | lab | load | policy | mean wait | max wait | fairness (waiting) | mean / EASY | goal |"
echo "|---|---|---:|---|---:|---:|---:|---:|---|"
for cell in "${cells[@]}"; do
  IFS='|' read -r name trace lab users <<<"$cell"
  for load in $LOADS; do
    # shellcheck disable=SC2086 # $users is two words
    "$GSSH" sim --trace "$trace" --lab "$lab" $users --load "$load" --policy "$POLICIES" --json |
      jq -r --arg name "$name" --arg lab "$lab" --arg load "$load" '
        (.policies[] | select(.policy == "fifo-backfill")) as $e
        | .policies[]
        | (.mean_wait_s / $e.mean_wait_s) as $r
        | [$name, $lab, $load, .policy,
           "\(.mean_wait_s / 3600 * 100 | round / 100) h", "\(.max_wait_s / 3600 * 10 | round / 10) h",
           "\(.jain_waiting * 1000 | round / 1000)", "\($r * 100 | round / 100)",
           (if .policy == "fifo-backfill" then "" elif $r <= 0.9 and .max_wait_s <= $e.max_wait_s and .jain_waiting >= $e.jain_waiting then "met" else "not met" end)]
        | "| " + join(" | ") + " |"'
  done
done
