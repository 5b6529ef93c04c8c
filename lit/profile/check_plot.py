#!/usr/bin/env python3
"""Checks a --plot SVG against the JSON report of the same run.

Usage: check_plot.py REPORT.json PLOT.svg [PLOT.png]
Every value of the report the plot should show is plotted exactly once
(data-x/data-y equal the JSON numbers), every marker is a report value, the
markers' pixel positions are ordered as their values (on each axis of each
panel), the axes are labelled with units, the legend names every device and
batch; a device's point is drawn hollow exactly where the report says it does
not fit in the device's memory (data-fits), and the legend explains the
hollow marker when there is one; with PLOT.png (rendered by rsvg-convert), the
PNG has the SVG's size.
"""
import json
import struct
import sys
import xml.etree.ElementTree as ET

NS = {'s': 'http://www.w3.org/2000/svg'}


def fail(msg):
    print('FAIL: ' + msg)
    sys.exit(1)


def main():
    report = json.load(open(sys.argv[1]))
    svg = ET.parse(sys.argv[2]).getroot()
    devices = [d['id'] for d in report['devices']]
    weights = report['model']['weight_bytes']
    want = {'ttft': set(), 'tpot': set(), 'memory': set()}
    # Whether each device point fits in the device's memory (hollow if not).
    fits = {}
    for p in report['points']:
        b = p['batch']
        for d in devices:
            key = (d, b, float(p['prefill']['seq']), float(p['prefill']['devices'][d]['time_s']))
            want['ttft'].add(key)
            fits[('ttft',) + key] = p['prefill']['devices'][d]['fits']
            for q in p['decode']:
                key = (d, b, float(q['past']), float(q['devices'][d]['time_s']))
                want['tpot'].add(key)
                fits[('tpot',) + key] = q['devices'][d]['fits']
        for q in p['decode']:
            want['memory'].add(('', b, q['past'], weights + q['kv_bytes']))
    counts = {}
    nofit = {}
    for g in svg.iter('{%s}g' % NS['s']):
        panel = g.get('data-panel')
        if not panel:
            continue
        got = set()
        marks = []
        for c in g.iter('{%s}circle' % NS['s']):
            key = (c.get('data-device'), int(c.get('data-batch')),
                   float(c.get('data-x')), float(c.get('data-y')))
            if key in got:
                fail('%s: value plotted twice: %s' % (panel, key))
            got.add(key)
            if panel in ('ttft', 'tpot'):
                fit = fits.get((panel,) + key)
                if c.get('data-fits') != ('1' if fit else '0'):
                    fail('%s: %s data-fits=%s, report fits=%s' % (panel, key, c.get('data-fits'), fit))
                if (c.get('fill') == 'white') == bool(fit):
                    fail('%s: %s drawn %s though it %s' % (panel, key, 'hollow' if not fit else 'filled',
                                                          'fits' if fit else 'does not fit'))
                nofit[panel] = nofit.get(panel, 0) + (0 if fit else 1)
            elif c.get('data-fits') is not None:
                fail('%s: %s has data-fits' % (panel, key))
            marks.append((float(c.get('data-x')), float(c.get('data-y')),
                          float(c.get('cx')), float(c.get('cy'))))
        exp = {(d, b, float(x), float(y)) for d, b, x, y in want[panel]}
        if got != exp:
            fail('%s: plotted %s, report %s' % (panel, sorted(got - exp), sorted(exp - got)))
        for i in range(len(marks)):
            for j in range(len(marks)):
                xi, yi, cxi, cyi = marks[i]
                xj, yj, cxj, cyj = marks[j]
                if xi < xj and not cxi < cxj:
                    fail('%s: x %g left of %g but drawn at %g >= %g' % (panel, xi, xj, cxi, cxj))
                if yi < yj and not cyi > cyj:
                    fail('%s: y %g below %g but drawn at %g <= %g' % (panel, yi, yj, cyi, cyj))
        labels = [t.text for t in g.iter('{%s}text' % NS['s']) if t.get('class') in ('xlabel', 'ylabel')]
        if len(labels) != 2 or not all('(' in l and ')' in l for l in labels):
            fail('%s: axis labels with units missing: %s' % (panel, labels))
        if not [t for t in g.iter('{%s}text' % NS['s']) if t.get('class') == 'ytick']:
            fail('%s: no y ticks' % panel)
        counts[panel] = len(got)
    if set(counts) != (set(want) if devices else {'memory'}):
        fail('panels %s' % sorted(counts))
    legend = ' '.join(t.text for g in svg.iter('{%s}g' % NS['s']) if g.get('class') == 'legend'
                      for t in g.iter('{%s}text' % NS['s']))
    for d in devices:
        if d not in legend:
            fail('legend lacks device %s' % d)
    for b in {p['batch'] for p in report['points']}:
        if 'batch %d' % b not in legend:
            fail('legend lacks batch %d' % b)
    if any(nofit.values()) != ('do not fit' in legend):
        fail('legend %s the hollow marker' % ('lacks' if any(nofit.values()) else 'explains an unused'))
    if len(sys.argv) > 3:
        png = open(sys.argv[3], 'rb').read()
        if png[:8] != b'\x89PNG\r\n\x1a\n':
            fail('not a PNG')
        w, h = struct.unpack('>II', png[16:24])
        if (w, h) != (round(float(svg.get('width'))), round(float(svg.get('height')))):
            fail('PNG %dx%d, SVG %sx%s' % (w, h, svg.get('width'), svg.get('height')))
        print('rendered %dx%d' % (w, h))
    print('ok: ' + ', '.join('%s %d' % (k, counts[k]) for k in sorted(counts)))
    if nofit:
        print('do not fit: ' + ', '.join('%s %d' % (k, nofit[k]) for k in sorted(nofit)))


main()
