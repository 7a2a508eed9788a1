"""Pick the S3-DEV hardware check's KernelBench solutions (python3 scripts/pick_fix_check.py KB DATA): per module
(tree_attention excluded) up to
10 ok (distinct tags first) + 5 wrong_result (distinct bugs first), written as a filtered index."""
import json, random, sys, collections
kb, data = sys.argv[1], sys.argv[2]
bug = {}
for line in open(f"{data}/episodes.jsonl"):
    e = json.loads(line)
    for s in e["steps"]:
        bug[(e["id"], s["step"])] = s.get("bug")
ix = json.load(open(f"{kb}/index.json"))
rng = random.Random(9393)
by = collections.defaultdict(list)
for s in ix["solutions"]:
    if s["module"] != "tree_attention_triton":
        s["bug"] = bug.get((s["episode"], s["step"]))
        by[(s["module"], s["status"])].append(s)
chosen = []
for (m, st), rows in sorted(by.items()):
    rng.shuffle(rows)
    key = (lambda r: r["bug"]) if st == "wrong_result" else (lambda r: r["tag"])
    seen, first, rest = set(), [], []
    for r in rows:
        (rest if key(r) in seen else first).append(r); seen.add(key(r))
    chosen += (first + rest)[: 5 if st == "wrong_result" else 10]
ix["solutions"] = chosen
json.dump(ix, open(f"{kb}/index.json", "w"), indent=1)
for (m, st), n in sorted(collections.Counter((r["module"], r["status"]) for r in chosen).items()):
    print(m, st, n, sorted({str(r["bug"]) for r in chosen if r["module"] == m and r["status"] == st}) if st != "ok" else "")
