"""How the simulator orders a module's device rows: within each (GPU, shape, dtype) group of the measured rows
(measurements/h*.json, docs/roomA_device_*/knob_device.json, and any knob_device.json under /tmp/roomA/device_out),
the rows' Spearman (weighted by group size) and pair order (pairs more than 3% apart) between the device's times and
the current model's, and the geomean of sim / device.

    python3 scripts/roomA_order.py flash_prefill_triton [pipelined,tma_descriptors] [--onlist] [-v]

--onlist: only rows whose every parameter value is on its rung's list (what an engineer can propose); -v: the rows.
Rows with a maxnreg knob, bug renders and failed rows are left out."""
import json, glob, sys, math, itertools
from collections import defaultdict
sys.path.insert(0, '.')
from kernelstrain.ops import REGISTRY
from kernelstrain.sim import simulate
from kernelstrain.tasks import make_task

def rows_of(mods, rungs=None, onlist=False):
    files = glob.glob('measurements/h*.json') + glob.glob('docs/roomA_device_*/knob_device.json') + glob.glob('/tmp/roomA/device_out/**/knob_device.json', recursive=True)
    seen, out = set(), []
    for f in sorted(files):
        d = json.load(open(f))
        gpu = 'H200' if ('h200' in f.lower() or 'H200' in json.dumps(d.get('meta', d.get('device', '')))) else 'H100'
        for r in d.get('rows', []):
            if r.get('module') not in mods or not r.get('ok') or not r.get('time_ms') or r.get('bug'):
                continue
            if rungs and r['variant'] not in rungs: continue
            p = r['params']
            if any(k in p and p[k] for k in ('maxnreg',)): continue
            m = REGISTRY[r['module']]
            try: v = m.variant(r['variant'])
            except Exception: continue
            if onlist:
                ok = all(p.get(q.name, q.default) in q.values for q in v.params)
                if not ok: continue
            key = (gpu, r['module'], r['variant'], json.dumps(p, sort_keys=True), json.dumps(r['shape'], sort_keys=True), r['dtype'])
            if key in seen: continue
            seen.add(key)
            dev = min(r['time_ms'], r.get('time_ms_2') or 9e9)
            out.append((gpu, r['module'], r['variant'], p, r['shape'], r['dtype'], dev))
    return out

def sim_of(row):
    gpu, mod, var, p, shape, dt, dev = row
    m = REGISTRY[mod]; v = m.variant(var)
    s = simulate(m, v, {**v.defaults(), **p}, make_task(m, gpu, dt, shape))
    return s.time_ms if s.ok else None

def rank(x):
    o = sorted(range(len(x)), key=lambda i: x[i]); r = [0]*len(x)
    for k, i in enumerate(o): r[i] = k
    return r

def spearman(a, b):
    n = len(a)
    if n < 3: return None
    ra, rb = rank(a), rank(b)
    d = sum((x-y)**2 for x, y in zip(ra, rb))
    return 1 - 6*d/(n*(n*n-1))

def evaluate(rows, verbose=False, noise=0.03):
    grp = defaultdict(list)
    for r in rows:
        s = sim_of(r)
        if s: grp[(r[0], r[1], json.dumps(r[4], sort_keys=True), r[5])].append((r[6], s, r))
    sp, n_sp, agree, pairs = 0, 0, 0, 0
    logs = 0; nlog = 0
    for k, lst in grp.items():
        if len(lst) >= 3:
            x = spearman([a for a, b, c in lst], [b for a, b, c in lst]); sp += x * len(lst); n_sp += len(lst)
        for (a1, b1, _), (a2, b2, _) in itertools.combinations(lst, 2):
            if abs(math.log(a1/a2)) < noise: continue
            pairs += 1; agree += (a1 < a2) == (b1 < b2)
        for a, b, c in lst: logs += math.log(b/a); nlog += 1
        if verbose:
            print(k)
            for a, b, c in sorted(lst, key=lambda t: t[0]):
                print(f"    {c[2]:18s} {json.dumps(c[3]):80s} dev {a*1e3:7.1f} sim {b*1e3:7.1f} {b/a:.2f}")
    print(f"rows {nlog} groups {len(grp)} weighted spearman {sp/max(1,n_sp):.3f} pair order {agree}/{pairs} = {agree/max(1,pairs):.3f} geomean sim/dev {math.exp(logs/max(1,nlog)):.3f}")

if __name__ == '__main__':
    mods = sys.argv[1].split(',')
    rungs = sys.argv[2].split(',') if len(sys.argv) > 2 and sys.argv[2] not in ('', '-') else None
    rows = rows_of(mods, rungs, '--onlist' in sys.argv)
    evaluate(rows, '-v' in sys.argv)
