#!/usr/bin/env bash
# One script for a fresh machine: `bash run.sh main` runs the main job, `bash run.sh test` the tests.
# It creates .venv (once), installs txnspec with its test tools into it, then runs what was asked.
set -euo pipefail
cd "$(dirname "$0")"

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
stamp="$venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet -e '.[test]'
  touch "$stamp"
fi
export PATH="$PWD/$venv/bin:$PATH"

case "${1:-}" in
  main)
    shift
    exec txnspec main "$@"
    ;;
  test)
    shift
    # Everything but the long runs (-m slow); the Spark and real-Kafka tests are included (-rs: why any skipped).
    set +e
    python -m pytest -m "not slow" -rs -p no:cacheprovider "$@"
    status=$?
    set -e
    [ "$status" -eq 5 ] && { echo "no tests were collected" >&2; exit 1; }
    exit "$status"
    ;;
  *)
    echo "usage: bash run.sh main|test [args...]" >&2
    exit 2
    ;;
esac
