"""Prints old vs new medians (ms, GB/s, ratio to the same run's floor) from bench-*.json."""
import json
import sys

runs = [(s, n) for n in (1, 2) for s in ("old", "new")]
data = {r: json.load(open(f"bench-{r[0]}-{r[1]}.json")) for r in runs}
print("| workload | phase | old run 1 | old run 2 | new run 1 | new run 2 |")
print("|---|---|---|---|---|---|")
for i, w in enumerate(data[runs[0]]["workloads"]):
    for phase in ("pause", "resume"):
        cells = []
        for r in [("old", 1), ("old", 2), ("new", 1), ("new", 2)]:
            m = data[r]["workloads"][i]["median"]
            ms, gbs, ratio = m.get(f"{phase}_ms"), m.get(f"{phase}_gbs"), m.get(f"{phase}_ratio")
            if ms is None:
                cells.append("-")
                continue
            c = f"{ms:.1f} ms"
            if gbs:
                c += f", {gbs:.1f} GB/s"
            if ratio:
                c += f" ({ratio:.2f}x)"
            cells.append(c)
        if any(c != "-" for c in cells):
            print(f"| ({w['id']}) {w['name']} | {phase} | " + " | ".join(cells) + " |")
