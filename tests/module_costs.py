"""Write tests/MODULE_COSTS.json from a recording of the test run (see tests/conftest.py).

    TXNSPEC_RECORD_COSTS=/tmp/costs.jsonl bash run.sh test
    python tests/module_costs.py /tmp/costs.jsonl

Each module's cost is the sum of its tests' CPU seconds (the process's and the children's it waited for: a
Spark or Kafka JVM counts) or wall seconds, whichever is larger: a test that waits (a timeout, a broker
starting) holds its worker as long as one that computes. Record on an otherwise idle machine; on a loaded one
(wall seconds mean nothing there) ``--cpu`` counts CPU seconds only. Prints the table, the total and the
longest module's share, which must stay well under half for two workers to balance.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

TABLE = Path(__file__).with_name("MODULE_COSTS.json")


def costs(lines: list[str], cpu_only: bool = False) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for line in lines:
        row = json.loads(line)
        cost = float(row["cpu"]) if cpu_only else max(float(row["cpu"]), float(row["wall"]))
        out[row["module"]] += cost
    return dict(out)


def main(argv: list[str]) -> int:
    cpu_only = "--cpu" in argv
    files = [a for a in argv if a != "--cpu"]
    if len(files) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    table = costs(Path(files[0]).read_text(encoding="utf-8").splitlines(), cpu_only)
    ordered = dict(sorted(((m, round(s, 1)) for m, s in table.items()), key=lambda kv: -kv[1]))
    TABLE.write_text(json.dumps({"how": "python tests/module_costs.py FILE (see tests/conftest.py)",
                                 "measure": "cpu seconds" if cpu_only else "max(cpu, wall) seconds",
                                 "seconds": ordered}, indent=1) + "\n", encoding="utf-8")
    total = sum(ordered.values())
    for module, seconds in ordered.items():
        print(f"{seconds:8.1f}  {module}")
    longest = max(ordered.values(), default=0.0)
    print(f"total {total:.0f} s over {len(ordered)} modules; the longest {longest:.0f} s "
          f"({100 * longest / max(total, 1):.0f}% of the total)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
