#!/bin/bash
# Grade a class on Slurm: a job array of N shards (grade-array.sbatch), then the
# merge of their reports into OUT/grades.csv (merge.sbatch), queued to run once
# every task of the array has succeeded.
#
#   cluster/slurm/submit.sh -n 8 -o /shared/course/grades /shared/course/submitted
#   cluster/slurm/submit.sh -n 8 -o /shared/course/grades --tasks 3,5 /shared/course/submitted
#
# The second line runs tasks 3 and 5 of the same 8 shards again (after a failure;
# their notebooks that already have a report are skipped) and a new merge.
#
# Options:
#   -n N          number of shards, one array task each (default: 4)
#   -o DIR        output folder, on the shared file system (default: $REPO/grades)
#   --tasks LIST  submit only these tasks of the N, in Slurm's array syntax (3,5 or 0-3)
#   --cpus C      CPUs per task, the grader's --jobs (default: grade-array.sbatch's 2)
#   --mem M       memory per task (default: grade-array.sbatch's 10G)
#   --time T      time limit per task (default: grade-array.sbatch's 4 hours)
#   --gpu         one GPU per task (--gres=gpu:1), graded with --device cuda
#   --force       grade again the notebooks that already have an up-to-date report
#   --no-merge    submit the array only
# Arguments: the submission folders (default: the bundled samples).
# Environment: REPO (default: the repository this script is in), VENV (default:
# $REPO/.venv); Slurm's SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_QOS and the like
# apply to both jobs.
#
# Prints ARRAY_JOB_ID=<id> and MERGE_JOB_ID=<id> on standard output; job output
# goes to OUT/slurm-logs/.
set -eo pipefail

usage() {
    sed -n '2,/^set -eo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit "${1:-0}"
}

die() {
    echo "submit.sh: $*" >&2
    exit 3
}

# sbatch --parsable prints "<job id>" or "<job id>;<cluster>".
submit() {
    local reply
    reply=$(sbatch --parsable "$@") || die "sbatch failed: sbatch $*"
    echo "${reply%%;*}"
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(realpath -s -- "${REPO:-$HERE/../..}")
VENV=$(realpath -s -- "${VENV:-$REPO/.venv}")
SHARDS=4
OUT=$REPO/grades
TASKS=
MERGE=1
array_options=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) SHARDS=$2; shift 2 ;;
        -o) OUT=$2; shift 2 ;;
        --tasks) TASKS=$2; shift 2 ;;
        --cpus) array_options+=("--cpus-per-task=$2"); shift 2 ;;
        --mem) array_options+=("--mem=$2"); shift 2 ;;
        --time) array_options+=("--time=$2"); shift 2 ;;
        --gpu) array_options+=("--gres=gpu:1"); export DEVICE=cuda; shift ;;
        --force) export FORCE=1; shift ;;
        --no-merge) MERGE=; shift ;;
        -h | --help) usage 0 ;;
        --) shift; break ;;
        -*) echo "submit.sh: unknown option $1" >&2; usage 3 ;;
        *) break ;;
    esac
done

case "$SHARDS" in
    '' | *[!0-9]* | 0) die "-n takes the number of shards, not '$SHARDS'" ;;
esac
[ -n "$OUT" ] || die "-o takes the output folder"
[ -x "$VENV/bin/python" ] || die "no Python in VENV=$VENV (run make setup in $REPO)"
OUT=$(realpath -s -m -- "$OUT")
paths=()
for path in "$@"; do
    [ -e "$path" ] || die "no such submission folder: $path"
    paths+=("$(realpath -s -- "$path")")
done
mkdir -p "$OUT/slurm-logs"

# The sbatch files read these from the environment sbatch passes on.
export SHARDS OUT REPO VENV

array=$(submit --array="${TASKS:-0-$((SHARDS - 1))}" "${array_options[@]}" \
    --output="$OUT/slurm-logs/grade-%A_%a.out" --chdir="$REPO" \
    "$HERE/grade-array.sbatch" "${paths[@]}")
echo "ARRAY_JOB_ID=$array"
echo "submitted grade array $array: tasks ${TASKS:-0-$((SHARDS - 1))} of $SHARDS shards, reports in $OUT" >&2

if [ -n "$MERGE" ]; then
    # afterok on the array's id waits for all its tasks; if one fails the merge is
    # cancelled instead of waiting forever.
    merge=$(submit --dependency="afterok:$array" --kill-on-invalid-dep=yes \
        --output="$OUT/slurm-logs/merge-%j.out" --chdir="$REPO" "$HERE/merge.sbatch")
    echo "MERGE_JOB_ID=$merge"
    echo "submitted merge $merge: $OUT/grades.csv once the array has succeeded" >&2
fi
