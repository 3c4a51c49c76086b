#!/usr/bin/env python3
"""ptxvk differential tester: random CUDA kernels, nvcc -> PTX -> ptxvk
(libcuda.so.1 on lavapipe), compared with a host C++ reference of the same
source. See README.md in this directory.

    python3 tests/difftest/difftest.py --seed S --count N [--modes O3,G,numba]
        [--batch 40] [--lib PATH] [--minimize] [--out DIR] [--jobs 2]
    python3 tests/difftest/difftest.py --short
    python3 tests/difftest/difftest.py --short-numba
    python3 tests/difftest/difftest.py --short-spin

Mode `numba`: the same programs rendered as Python for numba-cuda
(numba_render.py), NVVM's PTX instead of nvcc's, same reference.
"""

import argparse
import concurrent.futures
import copy
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gen  # noqa: E402
import numba_render  # noqa: E402
import prelude  # noqa: E402

POISON = 0xABABABAB
MODES = {'O3': ['-O3'], 'G': ['-G']}
NUMBA = 'numba'    # mode: the numba subset (numba_render.py), compiled by numba-cuda
ALL_MODES = list(MODES) + [NUMBA]
NVCC_COMMON = ['-ptx', '-arch=sm_80', '-fmad=false', '-w']
GXX = ['g++', '-O1', '-ffp-contract=off', '-std=c++20', '-pthread', '-w']
DEFAULT_LIB = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'target', 'release', 'libcuda.so.1')
SHORT_SEED, SHORT_COUNT = 20240601, 150
SHORT_NUMBA_SEED, SHORT_NUMBA_COUNT = 20241202, 50
SHORT_SPIN_SEED, SHORT_SPIN_COUNT = 20261205, 60
SHORT_WARPSYNC_SEED, SHORT_WARPSYNC_COUNT = 20261206, 40

_print_lock = threading.Lock()


def log(*a):
    with _print_lock:
        print(*a, flush=True)


class Infra(Exception):
    """nvcc / g++ / reference failure: never counted as a pass."""


def find_nvcc():
    if os.environ.get('NVCC'):
        return os.environ['NVCC']
    hits = sorted(glob.glob('/tmp/ptxvk-client-venv/lib/python3*/site-packages/nvidia/cu*/bin/nvcc'))
    if hits:
        return hits[-1]
    w = shutil.which('nvcc')
    if w:
        return w
    raise Infra('nvcc not found (set NVCC=...)')


def find_numba_python():
    """A python with numba-cuda ($NUMBA_PYTHON, else the client venv's)."""
    if os.environ.get('NUMBA_PYTHON'):
        return os.environ['NUMBA_PYTHON']
    venv = os.environ.get('PTXVK_CLIENT_VENV', '/tmp/ptxvk-client-venv')
    py = os.path.join(venv, 'bin', 'python')
    if os.path.exists(py):
        return py
    raise Infra('no python with numba-cuda (set NUMBA_PYTHON=...)')


def run(cmd, timeout, **kw):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise Infra(f'timeout ({timeout} s): {" ".join(cmd)}')


# ---------------------------------------------------------------- build

def cuda_source(progs):
    parts = [prelude.CUDA_PRELUDE, prelude.COMMON]
    for i, p in enumerate(progs):
        parts.append(p.render(f'p{i}'))
    return '\n'.join(parts)


def host_source(progs):
    parts = [prelude.HOST_PRELUDE, prelude.COMMON]
    for i, p in enumerate(progs):
        parts.append(p.render(f'p{i}'))
    m = []
    for i, p in enumerate(progs):
        m.append(f'static const unsigned dt_in_{i}[{len(p.in_words)}] = {{' +
                 ','.join(f'{w:#x}u' for w in p.in_words) + '};')
    m.append('struct DtCase { dt_kernel_fn k; dim3 g, b; const unsigned *in; unsigned out_words; };')
    m.append('static const DtCase dt_cases[] = {')
    for i, p in enumerate(progs):
        g, b = p.grid, p.block
        m.append(f'  {{p{i}_k, {{{g[0]}, {g[1]}, {g[2]}}}, {{{b[0]}, {b[1]}, {b[2]}}}, dt_in_{i}, {p.out_words()}u}},')
    m.append('};')
    init = ', '.join(f'{w:#x}u' for w in gen.atom_init())
    m.append(f'''
int main(int argc, char **argv) {{
  int n = (int)(sizeof(dt_cases) / sizeof(dt_cases[0]));
  int lo = 0, hi = n;
  if (argc > 1) {{ lo = atoi(argv[1]); hi = lo + 1; }}
  for (int i = lo; i < hi; i++) {{
    const DtCase &c = dt_cases[i];
    std::vector<unsigned> out(c.out_words, 0x{POISON:x}u);
    unsigned atom[{gen.N_ATOM}] = {{{init}}};
    dt_launch(c.k, c.g, c.b, c.in, out.data(), atom);
    printf("C %d\\n", i);
    for (unsigned w : out) printf("%x ", w);
    printf("\\n");
    for (unsigned w : atom) printf("%x ", w);
    printf("\\n");
  }}
  return 0;
}}
''')
    return '\n'.join(parts + m)


def compile_ptx(cu_path, mode, ptx_path):
    cmd = [find_nvcc()] + NVCC_COMMON + MODES[mode] + [cu_path, '-o', ptx_path]
    r = run(cmd, 600)
    if r.returncode != 0:
        raise Infra(f'nvcc failed ({mode}): {" ".join(cmd)}\n{r.stderr.decode(errors="replace")[-4000:]}')
    inject(ptx_path)
    return cmd


def inject(ptx_path):
    if INJECT:
        # testing the tester: a deliberate "miscompile" of the PTX
        with open(ptx_path) as fh:
            t = fh.read()
        for pat, repl in INJECT:
            t = re.sub(pat, repl, t)
        with open(ptx_path, 'w') as fh:
            fh.write(t)


def numba_build(progs, workdir, tag):
    """Render the programs of the numba subset as one Python module, compile
    each kernel with numba-cuda (one process). Per program:
    ('ok', ptx path relative to workdir, entry name) | ('skip', why) |
    ('numba-compile', error)."""
    info = [None] * len(progs)
    items = []
    for i, p in enumerate(progs):
        try:
            numba_render.render(p, f'p{i}')
            items.append((p, f'p{i}'))
        except numba_render.Unsupported as e:
            info[i] = ('skip', str(e))
    if not items:
        return info
    d = os.path.join(workdir, f'{tag}_numba')
    os.makedirs(d, exist_ok=True)
    py = os.path.join(d, 'kernels.py')
    with open(py, 'w') as fh:
        fh.write(numba_render.module_source(items))
    res_path = os.path.join(d, 'numba_result.json')
    if os.path.exists(res_path):
        os.remove(res_path)
    cmd = [find_numba_python(), py, d, ','.join(f'{pfx}_k' for _, pfx in items)]
    r = run(cmd, 1800)
    if r.returncode != 0 or not os.path.exists(res_path):
        raise Infra(f'numba compile failed: {" ".join(cmd)}\n{r.stderr.decode(errors="replace")[-4000:]}')
    with open(res_path) as fh:
        res = json.load(fh)
    for p, pfx in items:
        i = int(pfx[1:])
        x = res.get(pfx + '_k') or {'error': 'no result'}
        if 'error' in x:
            info[i] = ('numba-compile', x['error'])
        else:
            inject(os.path.join(d, x['ptx']))
            info[i] = ('ok', os.path.join(os.path.basename(d), x['ptx']), x['entry'])
    return info


def reference(progs, workdir, tag, check_twice=False):
    """Compile the host reference of `progs`, run it; [(out, atom)] per program."""
    cpp = os.path.join(workdir, f'{tag}.cpp')
    exe = os.path.join(workdir, f'{tag}.host')
    with open(cpp, 'w') as fh:
        fh.write(host_source(progs))
    r = run(GXX + [cpp, '-o', exe], 900)
    if r.returncode != 0:
        raise Infra(f'g++ failed: {cpp}\n{r.stderr.decode(errors="replace")[-4000:]}')
    res = parse_ref(run_ref(exe), len(progs), exe)
    if check_twice:
        res2 = parse_ref(run_ref(exe), len(progs), exe)
        for i, (a, b) in enumerate(zip(res, res2)):
            if a != b:
                raise Infra(f'host reference not deterministic: program {i} seed {progs[i].seed} ({exe})')
    return res


def run_ref(exe):
    r = run([exe], 900)
    if r.returncode != 0:
        raise Infra(f'host reference failed (status {r.returncode}): {exe}\n{r.stderr.decode(errors="replace")[-2000:]}')
    return r.stdout.decode()


def parse_ref(text, n, exe):
    lines = text.split('\n')
    res = [None] * n
    k = 0
    while k + 2 < len(lines) + 1 and k < len(lines):
        if lines[k].startswith('C '):
            i = int(lines[k][2:])
            out = [int(x, 16) for x in lines[k + 1].split()]
            atom = [int(x, 16) for x in lines[k + 2].split()]
            res[i] = (out, atom)
            k += 3
        else:
            k += 1
    if any(r is None for r in res):
        raise Infra(f'host reference output incomplete: {exe}')
    return res


def case_json(p, kernel, exp):
    return {'kernel': kernel, 'grid': list(p.grid), 'block': list(p.block), 'in_words': p.in_words,
            'out_words': p.out_words(), 'atom_words': gen.N_ATOM, 'atom_init': gen.atom_init(),
            'expected_out': exp[0], 'expected_atom': exp[1], 'seed': p.seed}


def write_manifest(path, ptx_name, progs, expected, mode):
    man = {'ptx': ptx_name, 'mode': mode,
           'cases': [case_json(p, f'p{i}_k', e) for i, (p, e) in enumerate(zip(progs, expected))]}
    with open(path, 'w') as fh:
        json.dump(man, fh)


# ---------------------------------------------------------------- PTX splitting

def split_ptx(ptx, prefix):
    """The module restricted to one program's kernel and functions (symbols
    p<N>_...): header, shared helpers and this prefix's symbols."""
    lines = ptx.split('\n')
    items, cur, depth = [], [], 0
    for ln in lines:
        cur.append(ln)
        depth += ln.count('{') - ln.count('}')
        s = ln.strip()
        if depth == 0 and ('}' in s or s.endswith(';') or (
                len(cur) == 1 and not re.match(r'\.(visible|weak|extern|entry|func)\b', s))):
            items.append('\n'.join(cur))
            cur = []
    if cur:
        items.append('\n'.join(cur))
    keep = []
    for it in items:
        m = re.search(r'\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)', it)
        if m and re.match(r'p\d+_', m.group(1)) and not m.group(1).startswith(prefix + '_'):
            continue
        keep.append(it)
    return '\n'.join(keep)


# ---------------------------------------------------------------- ptxvk

CASE_TIMEOUT = [120]
SLOW_S = 20.0
INJECT = []   # [(regex, replacement)] applied to every PTX (--inject, to test the tester)


def run_gpu(manifest, lib, n, timeout_case=None):
    """Run all cases of a manifest; [('ok', out, atom) | ('error'|'crash'|'timeout'|'module', msg)]."""
    timeout_case = timeout_case or CASE_TIMEOUT[0]
    res = [None] * n
    start = 0
    env = dict(os.environ)
    env['DIFFTEST_TIMING'] = '1'
    env.setdefault('VK_ICD_FILENAMES', '/usr/share/vulkan/icd.d/lvp_icd.x86_64.json')
    while start < n:
        cmd = [sys.executable, os.path.join(HERE, 'cuda_runner.py'), manifest, '--lib', lib, '--start', str(start)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        errbuf = []
        t_err = threading.Thread(target=lambda: errbuf.append(proc.stderr.read()), daemon=True)
        t_err.start()
        current = None
        deadline = [time.time() + 300]
        timer_fired = [False]

        def watchdog():
            while proc.poll() is None:
                if time.time() > deadline[0]:
                    timer_fired[0] = True
                    proc.kill()
                    return
                time.sleep(0.5)
        wd = threading.Thread(target=watchdog, daemon=True)
        wd.start()
        module_err = None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if 'start' in msg:
                current = msg['start']
                deadline[0] = time.time() + timeout_case
            elif 'i' in msg and 'module_error' in msg:   # a case's own PTX module (numba)
                res[msg['i']] = ('module', msg['module_error'])
                current = None
            elif 'module_error' in msg:
                module_err = msg['module_error']
            elif 'i' in msg:
                i = msg['i']
                if 'error' in msg:
                    res[i] = ('error', msg['error'])
                else:
                    res[i] = ('ok', msg['out'], msg['atom'])
                current = None
        proc.wait()
        t_err.join(timeout=5)
        stderr = ''.join(errbuf)
        for m in re.finditer(r'difftest timing: case (\d+) (\S+) ([\d.]+) s', stderr):
            if float(m.group(3)) > SLOW_S:
                log(f'difftest: SLOW {manifest} case {m.group(1)} {m.group(2)}: {m.group(3)} s')
        if module_err is not None:
            for i in range(start, n):
                res[i] = ('module', module_err + '\n' + stderr[-2000:])
            break
        if current is not None:
            res[current] = ('timeout' if timer_fired[0] else 'crash',
                            f'runner status {proc.returncode}; stderr tail:\n{stderr[-2000:]}')
        done = [i for i in range(n) if res[i] is not None]
        nxt = max(done) + 1 if done else n
        if nxt <= start:
            if proc.returncode not in (0, 5):
                raise Infra(f'cuda_runner died before any case (status {proc.returncode}):\n{stderr[-3000:]}')
            nxt = n
        start = nxt
    return res


def compare(p, exp, got):
    """None if equal, else (kind, description)."""
    if got is None:
        return ('missing', 'no result')
    if got[0] != 'ok':
        return (got[0], got[1])
    out, atom = got[1], got[2]
    eo, ea = exp
    if out == eo and atom == ea:
        return None
    diffs = []
    for k, (a, b) in enumerate(zip(eo, out)):
        if a != b:
            t, j = divmod(k, p.W)
            diffs.append(f'out[{k}] (thread {t} word {j}): expected {a:#010x} got {b:#010x}')
    for k, (a, b) in enumerate(zip(ea, atom)):
        if a != b:
            diffs.append(f'atom[{k}] ({gen.ATOM_OPS[k % 8]}): expected {a:#010x} got {b:#010x}')
    n = len(diffs)
    return ('mismatch', f'{n} words differ: ' + '; '.join(diffs[:6]) + (' ...' if n > 6 else ''))


def ptx_of_prog_module_fallback(manifest_path, progs, lib):
    """Module load failed for the batch: load each program's PTX alone."""
    with open(manifest_path) as fh:
        man = json.load(fh)
    d = os.path.dirname(manifest_path)
    with open(os.path.join(d, man['ptx'])) as fh:
        ptx = fh.read()
    res = []
    for i in range(len(progs)):
        sub = os.path.join(d, f'split_p{i}.ptx')
        with open(sub, 'w') as fh:
            fh.write(split_ptx(ptx, f'p{i}'))
        m2 = dict(man)
        m2['ptx'] = os.path.basename(sub)
        m2['cases'] = [man['cases'][i]]
        mp = os.path.join(d, f'split_p{i}.json')
        with open(mp, 'w') as fh:
            json.dump(m2, fh)
        res.append(run_gpu(mp, lib, 1)[0])
    return res


def evaluate(progs, modes, workdir, tag, lib, check_twice=False):
    """Build and run a batch. Returns {mode: [None | (kind, desc)]}, expected.
    Kinds besides the failures: 'skip' (not in the numba subset) and
    'numba-compile' (numba-cuda rejected the rendering: a tester problem)."""
    os.makedirs(workdir, exist_ok=True)
    nv = [m for m in modes if m in MODES]
    nb = numba_build(progs, workdir, tag) if NUMBA in modes else None
    need = list(range(len(progs))) if nv else [i for i in range(len(progs)) if nb[i][0] == 'ok']
    expected = [None] * len(progs)
    if need:
        for i, e in zip(need, reference([progs[i] for i in need], workdir, tag, check_twice)):
            expected[i] = e
    results = {}
    if nv:
        cu = os.path.join(workdir, f'{tag}.cu')
        with open(cu, 'w') as fh:
            fh.write(cuda_source(progs))
    for mode in nv:
        ptx = os.path.join(workdir, f'{tag}_{mode}.ptx')
        compile_ptx(cu, mode, ptx)
        man = os.path.join(workdir, f'{tag}_{mode}.json')
        write_manifest(man, os.path.basename(ptx), progs, expected, mode)
        got = run_gpu(man, lib, len(progs))
        if got and all(g is not None and g[0] == 'module' for g in got) and len(progs) > 1:
            got = ptx_of_prog_module_fallback(man, progs, lib)
        results[mode] = [compare(p, e, g) for p, e, g in zip(progs, expected, got)]
    if nb is not None:
        res = [None] * len(progs)
        cases, idx = [], []
        for i, (p, x) in enumerate(zip(progs, nb)):
            if x[0] == 'ok':
                cases.append(numba_case(p, x[2], expected[i], x[1]))
                idx.append(i)
            else:
                res[i] = x
        if cases:
            man = os.path.join(workdir, f'{tag}_{NUMBA}.json')
            with open(man, 'w') as fh:
                json.dump({'mode': NUMBA, 'cases': cases}, fh)
            got = run_gpu(man, lib, len(cases))
            for i, g in zip(idx, got):
                res[i] = compare(progs[i], expected[i], g)
        results[NUMBA] = res
    return results, expected


def numba_case(p, entry, exp, ptx=None):
    """A manifest case of a numba kernel: its parameters are numba arrays."""
    c = case_json(p, entry, exp)
    c['abi'] = 'numba'
    if ptx is not None:
        c['ptx'] = ptx
    return c


# ---------------------------------------------------------------- minimizer

def valid(p):
    """Structural validity after an edit: break/continue/goto targets exist and
    break/continue never leave a uniform loop."""
    ok = [True]

    def stmts(body, loop, brk, labels):
        for s in body:
            stmt(s, loop, brk, labels)

    def stmt(s, loop, brk, labels):
        if isinstance(s, gen.Simple):
            if s.text == 'break;' and brk != 'div':
                ok[0] = False
            if s.text == 'continue;' and loop != 'div':
                ok[0] = False
            if s.text.startswith('goto ') and s.text[5:-1] not in labels:
                ok[0] = False
        elif isinstance(s, gen.If):
            stmts(s.then, loop, brk, labels)
            stmts(s.els, loop, brk, labels)
        elif isinstance(s, (gen.For, gen.GridStride)):
            stmts(s.body, 'div', 'div', labels)
        elif isinstance(s, gen.While):
            if isinstance(s.c, gen.UCond):
                stmts(s.body, 'uni', 'uni', labels)
            else:
                stmts(s.body, 'div', 'div', labels)
        elif isinstance(s, gen.UFor):
            stmts(s.body, 'uni', 'uni', labels)
        elif isinstance(s, gen.Switch):
            for c in s.cases:
                stmts(c.body, loop, 'div', labels)
        elif isinstance(s, gen.Block):
            stmts(s.body, loop, brk, labels + [s.label])
        elif isinstance(s, gen.Scope):
            stmts(s.body, loop, brk, labels)
    for f in p.funcs:
        stmts(f.body, None, None, [])
    stmts(p.ubody, None, None, [])
    stmts(p.fbody, None, None, [])
    return ok[0]


def stmt_sites(p):
    """Every statement list of the program (deterministic order)."""
    lists = []

    def visit(n):
        for name, kind in n._f:
            v = getattr(n, name)
            if v is None:
                continue
            if kind == 's':
                lists.append(v)
                for s in v:
                    visit(s)
            elif kind in ('c', 'fl'):
                for c in v:
                    visit(c)
    visit(p)
    return lists


def expr_sites(p):
    """(holder, key) of every expression slot, key an attribute name or list index."""
    sites = []

    def visit_e(holder, key, e):
        sites.append((holder, key))
        visit(e)

    def visit(n):
        for name, kind in n._f:
            v = getattr(n, name)
            if v is None:
                continue
            if kind == 'e':
                visit_e(n, name, v)
            elif kind == 'el':
                for k, x in enumerate(v):
                    visit_e(v, k, x)
            else:
                for s in v:
                    visit(s)
    visit(p)
    return sites


def get_slot(holder, key):
    return holder[key] if isinstance(key, int) else getattr(holder, key)


def set_slot(holder, key, v):
    if isinstance(key, int):
        holder[key] = v
    else:
        setattr(holder, key, v)


def candidates(p):
    """Yield functions that edit a deep copy of p (coarse edits first)."""
    nl = len(stmt_sites(p))
    # launch shape
    warp = gen.uses_warp(p)
    if p.grid != (1, 1, 1):
        yield ('grid=1', lambda q: setattr(q, 'grid', (1, 1, 1)))
    for b in ([(32, 1, 1)] if warp else [(32, 1, 1), (8, 1, 1), (1, 1, 1)]):
        if b != p.block and b[0] * b[1] * b[2] < p.nthr:
            yield (f'block={b}', lambda q, b=b: setattr(q, 'block', b))
    for li in range(nl):
        n = len(stmt_sites(p)[li])
        for si in range(n):
            yield (f'del {li}.{si}', lambda q, li=li, si=si: stmt_sites(q)[li].pop(si))

            def unwrap(q, li=li, si=si, which=0):
                lst = stmt_sites(q)[li]
                s = lst[si]
                if isinstance(s, gen.If):
                    repl = s.then if which == 0 else s.els
                elif isinstance(s, (gen.For, gen.UFor)):
                    repl = [gen.Scope(s.iv, '0u', s.body)]
                elif isinstance(s, gen.GridStride):
                    repl = [gen.Scope(s.iv, 'gtid', s.body)]
                elif isinstance(s, (gen.While, gen.Block, gen.Scope)):
                    repl = s.body
                elif isinstance(s, gen.Switch):
                    if which >= len(s.cases):
                        raise ValueError
                    repl = s.cases[which].body
                elif isinstance(s, gen.ShXchg):
                    repl = [gen.Assign(s.var, s.rd)] if which == 0 else []
                    if which:
                        raise ValueError
                else:
                    raise ValueError
                lst[si:si + 1] = repl
            s = stmt_sites(p)[li][si]
            if isinstance(s, (gen.If, gen.For, gen.GridStride, gen.While, gen.UFor, gen.Block, gen.Switch, gen.Scope)):
                ways = 2 if isinstance(s, gen.If) else (len(s.cases) if isinstance(s, gen.Switch) else 1)
                for w in range(ways):
                    yield (f'unwrap {li}.{si}/{w}', lambda q, f=unwrap, w=w: f(q, which=w))
    ne = len(expr_sites(p))
    for ei in range(ne):
        holder, key = expr_sites(p)[ei]
        e = get_slot(holder, key)
        if isinstance(e, gen.Const):
            if e.ty != 'bool' and e.v not in (0, 1) and not (isinstance(e.v, float) and e.v != e.v):
                yield (f'const0 {ei}', lambda q, ei=ei, t=e.ty, z=type(e.v)(0): set_slot(*expr_sites(q)[ei], gen.Const(t, z)))
            continue
        if isinstance(e, (gen.Var, gen.Raw)):
            continue
        yield (f'zero {ei}', lambda q, ei=ei, t=e.ty: set_slot(*expr_sites(q)[ei], gen.Const(t, 0.0 if gen.isflt(t) else 0) if t != 'bool' else gen.Const('bool', False)))
        if e.no_lift:
            continue
        for ch in gen.children(e):
            if isinstance(ch, gen.Expr) and ch.ty == e.ty:
                k = list(gen.children(e)).index(ch)
                yield (f'lift {ei}/{k}', lambda q, ei=ei, k=k: set_slot(*expr_sites(q)[ei], list(gen.children(get_slot(*expr_sites(q)[ei])))[k]))


def prune(p):
    """Drop functions no longer called (renumbering is unnecessary)."""
    used = set()

    def visit(n):
        if isinstance(n, gen.Call):
            used.add(n.fi)
        for ch in gen.children(n):
            visit(ch)
    visit(p)
    for v, init in p.vars:
        visit(init)
    changed = True
    while changed:
        changed = False
        for f in p.funcs:
            if f.idx in used:
                before = len(used)
                visit(f)
                if len(used) != before:
                    changed = True
    p.funcs = [f for f in p.funcs if f.idx in used]


def size(p):
    return sum(1 for _ in expr_sites(p)) + sum(len(x) for x in stmt_sites(p)) + p.ntot


def minimize(p, mode, kind, lib, workdir, budget_s=600, chunk=12):
    t0 = time.time()
    rounds = 0
    cur = copy.deepcopy(p)
    prune(cur)
    progress = True
    while progress and time.time() - t0 < budget_s:
        progress = False
        cands = list(candidates(cur))
        pos = 0
        while pos < len(cands) and time.time() - t0 < budget_s:
            batch, names = [], []
            while pos < len(cands) and len(batch) < chunk:
                name, f = cands[pos]
                pos += 1
                q = copy.deepcopy(cur)
                try:
                    f(q)
                except (ValueError, IndexError):
                    continue
                prune(q)
                if not valid(q) or (gen.uses_warp(q) and q.nthr % 32):
                    continue
                batch.append(q)
                names.append(name)
            if not batch:
                continue
            rounds += 1
            try:
                res, _ = evaluate(batch, [mode], workdir, f'min{rounds}', lib)
            except Infra as e:
                log(f'  minimize: candidate batch failed to build ({str(e).splitlines()[0]}); skipping')
                continue
            hit = [i for i, r in enumerate(res[mode]) if r is not None and r[0] == kind]
            if hit:
                best = min(hit, key=lambda i: size(batch[i]))
                cur = batch[best]
                log(f'  minimize: round {rounds}: {names[best]} -> size {size(cur)}')
                progress = True
                cands = list(candidates(cur))
                pos = max(0, pos - chunk - 1) if pos < len(cands) else 0
                pos = min(pos, len(cands))
    return cur


def write_fixture(p, mode, lib, outdir, name, note):
    if mode == NUMBA:
        return write_numba_fixture(p, lib, outdir, name, note)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    progs = [p]
    with open(os.path.join(d, 'kernel.cu'), 'w') as fh:
        fh.write(cuda_source(progs))
    with tempfile.TemporaryDirectory() as td:
        exp = reference(progs, td, 'ref', check_twice=True)[0]
        with open(os.path.join(d, 'reference.cpp'), 'w') as fh:
            fh.write(host_source(progs))
    cmd = [find_nvcc()] + NVCC_COMMON + MODES[mode] + ['kernel.cu', '-o', 'kernel.ptx']
    r = run(cmd, 300, cwd=d)
    if r.returncode != 0:
        raise Infra('nvcc failed on fixture ' + d)
    with open(os.path.join(d, 'cmd.txt'), 'w') as fh:
        fh.write('nvcc ' + ' '.join(cmd[1:]) + '\n')
    case = case_json(p, 'p0_k', exp)
    case['mode'] = mode
    case['note'] = note
    with open(os.path.join(d, 'case.json'), 'w') as fh:
        json.dump(case, fh, indent=1)
    man = {'ptx': 'kernel.ptx', 'mode': mode, 'cases': [case_json(p, 'p0_k', exp)]}
    with open(os.path.join(d, 'manifest.json'), 'w') as fh:
        json.dump(man, fh)
    got = run_gpu(os.path.join(d, 'manifest.json'), lib, 1)[0]
    c = compare(p, exp, got)
    return d, c


def write_numba_fixture(p, lib, outdir, name, note):
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    progs = [p]
    with open(os.path.join(d, 'kernel.py'), 'w') as fh:
        fh.write(numba_render.module_source([(p, 'p0')]))
    with tempfile.TemporaryDirectory() as td:
        exp = reference(progs, td, 'ref', check_twice=True)[0]
        with open(os.path.join(d, 'reference.cpp'), 'w') as fh:
            fh.write(host_source(progs))
    res_path = os.path.join(d, 'numba_result.json')
    r = run([find_numba_python(), 'kernel.py', '.', 'p0_k:kernel.ptx'], 600, cwd=d)
    if r.returncode != 0 or not os.path.exists(res_path):
        raise Infra('numba compile failed on fixture ' + d + '\n' + r.stderr.decode(errors='replace')[-2000:])
    with open(res_path) as fh:
        res = json.load(fh)['p0_k']
    os.remove(res_path)
    if 'error' in res:
        raise Infra('numba compile failed on fixture ' + d + ': ' + res['error'])
    with open(os.path.join(d, 'cmd.txt'), 'w') as fh:
        fh.write('python kernel.py . p0_k:kernel.ptx   # numba-cuda 0.30.4 (/tmp/ptxvk-client-venv): '
                 'cuda.compile_ptx(p0_k, (uint32[::1],) * 3, cc=(8, 0)) with NVVM option fma=0\n')
    case = numba_case(p, res['entry'], exp)
    case['mode'] = NUMBA
    case['note'] = note
    with open(os.path.join(d, 'case.json'), 'w') as fh:
        json.dump(case, fh, indent=1)
    man = {'ptx': 'kernel.ptx', 'mode': NUMBA, 'cases': [numba_case(p, res['entry'], exp)]}
    with open(os.path.join(d, 'manifest.json'), 'w') as fh:
        json.dump(man, fh)
    got = run_gpu(os.path.join(d, 'manifest.json'), lib, 1)[0]
    c = compare(p, exp, got)
    return d, c


# ---------------------------------------------------------------- main

def wait_for_lib(lib, max_wait):
    t0 = time.time()
    while not os.path.exists(lib):
        if time.time() - t0 > max_wait:
            raise Infra(f'{lib} does not exist (waited {max_wait} s)')
        log(f'difftest: waiting for {lib} ...')
        time.sleep(20)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--count', type=int, default=40)
    ap.add_argument('--seeds', default=None, help='comma-separated program seeds (as printed by FAIL lines)')
    ap.add_argument('--modes', default='O3,G')
    ap.add_argument('--batch', type=int, default=40)
    ap.add_argument('--lib', default=os.environ.get('DIFFTEST_LIB', DEFAULT_LIB))
    ap.add_argument('--minimize', action='store_true')
    ap.add_argument('--minimize-budget', type=int, default=600, help='seconds per mismatch')
    ap.add_argument('--out', default=None, help='work directory (default: a temporary one)')
    ap.add_argument('--fixtures', default=os.path.join(HERE, 'fixtures'))
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--inject', action='append', default=[], metavar='REGEX=>REPL',
                    help='rewrite the PTX (re.sub) before running it: checks that the tester finds and minimizes bugs')
    ap.add_argument('--features', default='', help="comma-separated optional statement kinds: poll (loops polling memory through volatile loads, counting their polls), lock (a shared spin lock the lanes of a warp contend for), spin (both), warpsync (warp-synchronous exchanges through volatile and plain shared memory that rely on lock step)")
    ap.add_argument('--avoid', default='', help="comma-separated known bugs to steer around: fdiv0 (float division by zero)")
    ap.add_argument('--case-timeout', type=int, default=120, help='seconds per case on ptxvk')
    ap.add_argument('--short', action='store_true', help=f'--seed {SHORT_SEED} --count {SHORT_COUNT}')
    ap.add_argument('--short-numba', action='store_true',
                    help=f'--seed {SHORT_NUMBA_SEED} --count {SHORT_NUMBA_COUNT} --modes numba')
    ap.add_argument('--short-spin', action='store_true',
                    help=f'--seed {SHORT_SPIN_SEED} --count {SHORT_SPIN_COUNT} --modes O3,G --features spin,warpsync')
    ap.add_argument('--short-warpsync', action='store_true',
                    help=f'--seed {SHORT_WARPSYNC_SEED} --count {SHORT_WARPSYNC_COUNT} --modes O3,G --features warpsync')
    ap.add_argument('--wait-lib', type=int, default=0, help='seconds to wait for --lib to appear')
    ap.add_argument('--check-ref', action='store_true', help='run each host reference twice')
    ap.add_argument('--keep', action='store_true', help='keep the work directory')
    a = ap.parse_args()
    if a.short:
        a.seed, a.count = SHORT_SEED, SHORT_COUNT
    if a.short_numba:
        a.seed, a.count, a.modes = SHORT_NUMBA_SEED, SHORT_NUMBA_COUNT, NUMBA
    if a.short_spin:
        a.seed, a.count, a.modes, a.features = SHORT_SPIN_SEED, SHORT_SPIN_COUNT, 'O3,G', 'spin,warpsync'
    if a.short_warpsync:
        a.seed, a.count, a.modes, a.features = SHORT_WARPSYNC_SEED, SHORT_WARPSYNC_COUNT, 'O3,G', 'warpsync'
    CASE_TIMEOUT[0] = a.case_timeout
    gen.AVOID.update(x for x in a.avoid.split(',') if x)
    gen.FEATURES.update(x for x in a.features.split(',') if x)
    for x in a.inject:
        pat, repl = x.split('=>', 1)
        INJECT.append((pat, repl))
    modes = [m for m in a.modes.split(',') if m]
    for m in modes:
        if m not in ALL_MODES:
            ap.error(f'unknown mode {m}')
    try:
        if any(m in MODES for m in modes):
            find_nvcc()
        if NUMBA in modes:
            find_numba_python()
        wait_for_lib(a.lib, a.wait_lib)
    except Infra as e:
        log(f'difftest: INFRASTRUCTURE ERROR: {e}')
        log('difftest: 0 passed, 0 failed')
        return 2
    work = a.out or tempfile.mkdtemp(prefix='difftest-')
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    seeds = [a.seed * 100003 + i for i in range(a.count)]
    if a.seeds:
        seeds = [int(x) for x in a.seeds.split(',')]
    batches = [seeds[i:i + a.batch] for i in range(0, len(seeds), a.batch)]
    passed = failed = skipped = 0
    failures = []
    infra = []

    def do_batch(bi, bseeds):
        progs = [gen.generate(s) for s in bseeds]
        res, _ = evaluate(progs, modes, os.path.join(work, f'b{bi}'), 'batch', a.lib, a.check_ref)
        return progs, res

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = {ex.submit(do_batch, bi, bs): bi for bi, bs in enumerate(batches)}
        for fut in concurrent.futures.as_completed(futs):
            bi = futs[fut]
            try:
                progs, res = fut.result()
            except Infra as e:
                infra.append(str(e))
                log(f'difftest: batch {bi}: INFRASTRUCTURE ERROR: {e}')
                continue
            np = nf = ns = 0
            for mode in modes:
                for i, r in enumerate(res[mode]):
                    if r is None:
                        np += 1
                    elif r[0] == 'skip':
                        ns += 1
                    elif r[0] == 'numba-compile':
                        infra.append(f'numba compile: seed {progs[i].seed}: {r[1]}')
                        log(f'difftest: NUMBA-COMPILE-ERROR seed={progs[i].seed} (batch {bi}, '
                            f'{os.path.join(work, f"b{bi}")}): {r[1][-600:]}')
                    else:
                        nf += 1
                        failures.append((progs[i], mode, r, bi, i))
                        log(f'difftest: FAIL seed={progs[i].seed} mode={mode} kernel=p{i}_k (batch {bi}, '
                            f'{os.path.join(work, f"b{bi}")}): {r[0]}: {r[1][:600]}')
            passed += np
            failed += nf
            skipped += ns
            log(f'difftest: batch {bi}: {np} passed, {nf} failed' + (f', {ns} skipped' if ns else '')
                + f' ({time.time() - t0:.0f} s)')
    if a.minimize and failures:
        seen = set()
        for p, mode, r, bi, i in failures:
            if p.seed in seen:
                continue
            seen.add(p.seed)
            log(f'difftest: minimizing seed={p.seed} mode={mode} ({r[0]})')
            q = minimize(p, mode, r[0], a.lib, os.path.join(work, f'min_{p.seed}_{mode}'), a.minimize_budget)
            name = f'seed{p.seed}_{mode}'
            try:
                d, c = write_fixture(q, mode, a.lib, a.fixtures, name, f'{r[0]}: {r[1][:300]}')
                log(f'difftest: fixture {d}: {c[0] + ": " + c[1][:300] if c else "NO LONGER FAILS"}')
            except Infra as e:
                log(f'difftest: fixture failed: {e}')
    log(f'difftest: work directory {work}')
    if not a.out and not a.keep and not failures and not infra:
        shutil.rmtree(work, ignore_errors=True)
    if infra:
        log(f'difftest: {len(infra)} batch(es) or program(s) had infrastructure errors')
    if skipped:
        log(f'difftest: {skipped} skipped (programs outside the numba subset; not counted as passed)')
    log(f'difftest: {passed} passed, {failed} failed')
    if infra:
        return 2
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
