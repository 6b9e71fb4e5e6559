"""Check that no source of set D repeats a source of the other sets (same repository + same path = excluded).

    python3 check_overlap.py      # prints each case's repository and whether it, or its path, was used before
"""
import glob, json, os

HERE = os.path.dirname(os.path.abspath(__file__))
SETS = os.path.join(HERE, "..", "..")
prev = {}
for m in glob.glob(os.path.join(SETS, "*", "manifest.json")) + ["/work/shared/reference/runtime-logs/manifest.json"]:
    if os.path.basename(os.path.dirname(m)) == "heldout_d":
        continue
    for c in json.load(open(m)):
        s = c["source"]
        prev.setdefault(s.get("repository"), set()).add(s.get("path") or s.get("url"))
bad = 0
for c in json.load(open(os.path.join(HERE, "..", "manifest.json"))):
    s = c["source"]
    used = prev.get(s["repository"], set())
    same = s["path"] in used
    bad += same
    print(f"{c['id']:55s} {s['repository']:40s} {'same repository+path: EXCLUDED' if same else ('repository used before: ' + ', '.join(sorted(map(str, used))) if used else 'new repository')}")
assert not bad, "a source repeats an earlier set's source"
