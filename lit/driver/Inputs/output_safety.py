#!/usr/bin/env python3
"""Process-level checks of archc's output guarantees (lit/driver/output_safety.test).

  signal ARCHC OUT SIG ARGS...   start archc writing into folder OUT, send SIG
                                 (TERM, INT, KILL) while it stages; print how it
                                 ended and what OUT holds
  live-lock ARCHC OUT ARGS...    hold the lock of a staging folder as a live run
                                 would, run archc into OUT, print whether the
                                 folder survived
  concurrent ARCHC OUT N ARGS... run two archc writers into OUT (seeds 1 and 2,
                                 different chunk sizes) N times; check that OUT's
                                 set always equals one writer's set made alone
  fsize ARCHC LIMIT ARGS...      run archc with RLIMIT_FSIZE=LIMIT (SIGXFSZ
                                 ignored): writes fail with EFBIG
"""
import fcntl
import filecmp
import os
import resource
import signal
import subprocess
import sys
import time


def listing(out):
    names = []
    for root, dirs, files in os.walk(out):
        for n in dirs + files:
            names.append(os.path.relpath(os.path.join(root, n), out))
    return sorted(names)


def staging(out):
    return [n for n in os.listdir(out) if n.startswith('.archc-')] if os.path.isdir(out) else []


def cmd_signal(archc, out, sig, args):
    os.makedirs(out, exist_ok=True)
    # As from an interactive shell: lit may start tests with SIGINT ignored,
    # a disposition archc keeps (as nohup's).
    p = subprocess.Popen([archc, *args], stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 60
    while not staging(out):
        if p.poll() is not None or time.time() > deadline:
            print('archc finished before staging was seen (rc %s)' % p.returncode)
            return 1
        time.sleep(0.002)
    time.sleep(0.2)  # in the middle of writing the weights
    p.send_signal(getattr(signal, 'SIG' + sig))
    p.wait()
    print('killed by SIG%s: %s' % (sig, p.returncode == -getattr(signal, 'SIG' + sig)))
    print('left in OUT: %s' % (listing(out) or 'nothing'))
    return 0


def cmd_live_lock(archc, out, args):
    live = os.path.join(out, '.archc-tmp-1-live00')
    os.makedirs(live, exist_ok=True)
    open(os.path.join(live, 'partial'), 'w').close()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    rc = subprocess.run([archc, *args]).returncode
    print('archc rc %d, live staging folder kept: %s' % (rc, os.path.isdir(live)))
    os.close(fd)
    return 0


def cmd_concurrent(archc, out, n, args):
    base = os.path.dirname(out.rstrip('/'))
    writers = [['--seed=1', '--data-chunk-size=16384'], ['--seed=2', '--data-chunk-size=65536']]
    refs = []
    for i, w in enumerate(writers):
        ref = os.path.join(base, 'ref%d' % i) + '/'
        subprocess.run([archc, *args, *w, '-o', ref], check=True)
        refs.append(ref)
    mixed = 0
    for _ in range(n):
        ps = [subprocess.Popen([archc, *args, *w, '-o', out]) for w in writers]
        rcs = [p.wait() for p in ps]
        if any(rcs):
            print('a writer failed: %s' % rcs)
            return 1
        got = listing(out)
        same = [listing(r) == got and all(
            filecmp.cmp(os.path.join(out, f), os.path.join(r, f), shallow=False)
            for f in got if os.path.isfile(os.path.join(out, f))) for r in refs]
        if not any(same):
            mixed += 1
    print('%d runs of 2 concurrent writers, mixed sets: %d' % (n, mixed))
    return 0


def cmd_fsize(archc, limit, args):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    p = subprocess.run([archc, *args], preexec_fn=pre, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(p.stderr)
    print('rc %d' % p.returncode)
    return 0


def main():
    cmd, archc = sys.argv[1], sys.argv[2]
    if cmd == 'signal':
        return cmd_signal(archc, sys.argv[3], sys.argv[4], sys.argv[5:])
    if cmd == 'live-lock':
        return cmd_live_lock(archc, sys.argv[3], sys.argv[4:])
    if cmd == 'concurrent':
        return cmd_concurrent(archc, sys.argv[3], int(sys.argv[4]), sys.argv[5:])
    if cmd == 'fsize':
        return cmd_fsize(archc, int(sys.argv[3]), sys.argv[4:])
    print(__doc__)
    return 2


sys.exit(main())
