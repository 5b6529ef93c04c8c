#!/usr/bin/python3
"""Whether two `archc -emit=ir` outputs describe the same computation up to
the order of independent ops.

Usage: ir_equiv.py A.ir B.ir   (exit 0 and EQUIVALENT, or exit 1 and DIFFERENT)

Equivalent means: the same weight declarations (as a set: declaration order
may differ), and the graph and every region (layer kind, expert body) yield
the same dataflow, each value identified by its op, attributes, result types
and operands, recursively (not by its number), and hold the same multiset of
ops (so no op was added or dropped). It is the check behind an IR golden that
changes only because a composite evaluates independent ops in another order.
"""
import hashlib, re, sys
REF = re.compile(r'%[A-Za-z0-9_]+(?:#\d+)?')

def canon_module(text):
    lines = [l.rstrip() for l in text.split('\n')]
    weights = sorted(l.strip() for l in lines if l.strip().startswith('weight '))
    defs = {}          # '%12' -> (sig, operands, regions)
    stack = [[]]       # blocks: list of op ids / markers
    blocks = []        # finished blocks
    cur_header = ['graph']
    results = {}
    def h(*parts):
        return hashlib.sha1('\x1f'.join(parts).encode()).hexdigest()[:16]
    memo = {}
    def canon(ref):
        if ref in memo: return memo[ref]
        base, _, k = ref.partition('#')
        if base not in defs:
            v = 'arg:' + base
        else:
            sig, ops, regions = defs[base]
            v = h(sig, *[canon(o) for o in ops], *regions) + '#' + k
        memo[ref] = v
        return v
    # a stack of (op id owning the regions, header, op list, yield)
    frames = [{'owner': 'module', 'ops': [], 'regions': [], 'header': 'module', 'yield': None}]
    pending = []  # ops with open regions
    for l in lines:
        s = l.strip()
        if not s or s.startswith('//') or s.startswith('weight ') or s.startswith('archc.module'):
            continue
        if s.startswith('graph @'):
            frames.append({'owner': None, 'ops': [], 'regions': [], 'header': 'graph', 'yield': None})
            continue
        if s == '}':
            f = frames.pop()
            if f['owner'] == 'module':
                continue
            if f['owner'] == 'region':
                parent = frames[-1]
                parent['regions'].append(h(f['header'], f['yield'] or '', *sorted(f['ops'])))
            elif f['owner'] is not None:
                oid, sig, ops = f['owner']
                defs[oid] = (sig, ops, tuple(f['regions']))
                frames[-1]['ops'].append(canon(oid))
            else:
                results['graph'] = h(f['yield'] or '', *sorted(f['ops']))
            continue
        m = re.match(r'(%[A-Za-z0-9_]+)(?::\d+)? = (.*)$', s)
        if m:
            oid, rest = m.groups()
            refs = REF.findall(rest)
            sig = REF.sub('%', rest)
            if s.endswith('{'):
                frames.append({'owner': (oid, sig, refs), 'ops': [], 'regions': [], 'header': sig, 'yield': None})
            else:
                defs[oid] = (sig, refs, ())
                frames[-1]['ops'].append(canon(oid))
            continue
        if s.startswith('yield') or s.startswith('return'):
            frames[-1]['yield'] = h(s.split()[0], *[canon(r) for r in REF.findall(s)])
            continue
        if s.endswith('{'):   # region header: layers ..., ^body(...)
            frames.append({'owner': 'region', 'ops': [], 'regions': [], 'header': REF.sub('%', s), 'yield': None})
            continue
        raise SystemExit(f'unparsed line: {s}')
    return weights, results.get('graph')

if len(sys.argv) != 3:
    sys.exit(__doc__)
a, b = (open(p).read() for p in sys.argv[1:3])
wa, ga = canon_module(a)
wb, gb = canon_module(b)
ok = wa == wb and ga == gb and ga is not None
print(('EQUIVALENT' if ok else 'DIFFERENT') + ('' if wa == wb else ' (weights differ)'))
sys.exit(0 if ok else 1)
