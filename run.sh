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
  # setuptools' notes on editable installs are noise to a newcomer: keep pip's output in a log, show it on failure.
  log="$venv/install.log"
  if ! { "$venv/bin/python" -m pip install --quiet --upgrade pip &&
         "$venv/bin/python" -m pip install --quiet -e '.[test]'; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "installing txnspec into $venv failed (the log above is kept in $log)" >&2
    exit 1
  fi
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
    # The HTML report's browser test needs Chromium and its driver: install Debian's packages when they are
    # missing and we may (root with apt); otherwise that test is skipped and says why.
    if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
      if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "installing chromium and chromium-driver for the browser test" >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
          >/dev/null 2>&1 || echo "could not install chromium; the browser test will be skipped" >&2
      fi
    fi
    # Everything but the long runs (-m slow); the Spark and real-Kafka tests are included (-rs: why any skipped).
    # In parallel on the machine's cores (pytest-xdist). --dist loadfile keeps each module on one worker, and
    # tests/conftest.py's scheduler widens that unit: all Spark modules go to one worker, all modules of the shared
    # Kafka broker to one, so the Spark session and the broker start once per run (marks and --dist loadgroup are
    # not needed: pytest-xdist 3.8 cannot tag xdist_group marks under pytest 9.2).
    # --no-loadscope-reorder: modules go out longest first, as tests/conftest.py orders them by their measured
    # cost (tests/MODULE_COSTS.json), not by their number of tests.
    # One worker more than cores: a third of the suite's time is spent waiting for JVMs and brokers (one worker a
    # core kept 2 cores 65% busy: 654 CPU s in 506 s), and the extra worker fills those waits.
    # `bash run.sh test -m quick`: the representative quick tier only (under 90 s on 2 cores).
    workers=$(( $(nproc) + 1 ))
    set +e
    python -m pytest -m "not slow" -n "$workers" --dist loadfile --no-loadscope-reorder -p no:cacheprovider -rs "$@"
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
