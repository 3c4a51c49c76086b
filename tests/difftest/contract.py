#!/usr/bin/env python3
"""Differential test of multiply-add contraction (docs/contraction.md).

Generates random straight-line PTX programs (several basic blocks, a
conditionally skipped block, guarded instructions) of f32 or f64 `mul`,
`add`, `sub`, `neg`, `mov`, `abs`, `fma.rn` with and without `.rn`, `.ftz`
and `.sat`, products used once, several times, by copies, by stores and
across blocks, and registers reused after their last use. For each program:

1. a model of the contraction rule, written here independently of the
   translator (on the program's values, not on its registers), says which
   `add`/`sub` become fused multiply-adds and computes every thread's
   outputs exactly (Python integers and fractions: one rounding for a fused
   pair, two for a separate one);
2. `ptx2spv --print-contractions` must fuse as many sites as the model;
3. where `ptxas` and `nvdisasm` are found (pip packages nvidia-cuda-nvcc and
   nvidia-cuda-nvdisasm; `--ptxas`/`--nvdisasm` or PATH), the number of
   FFMA/DFMA instructions in ptxas's SASS must equal the model's count: the
   check of the rule against NVIDIA's compiler;
4. the program runs through a libcuda.so.1 (`--lib`) on 256 threads with
   random inputs (fixed seed per program), outputs poisoned first, and every
   output word must equal the model's, bit for bit.

    python3 contract.py --lib target/release/libcuda.so.1 --count 200 --seed 1

Prints one line per failing program (and writes it to --out-dir) and a
summary `N programs: A passed, B failed (ptxas checked: C)`; exits 1 on any
failure.
"""

import argparse
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

THREADS = 256
POISON = 0xABABABAB

# ---------------------------------------------------------------- rounding


def f32_bits(x):
    return struct.unpack('<I', struct.pack('<f', x))[0]


def bits_f32(b):
    return struct.unpack('<f', struct.pack('<I', b))[0]


def f64_bits(x):
    return struct.unpack('<Q', struct.pack('<d', x))[0]


def round_frac(q, ty):
    """Round an exact rational to the nearest f32/f64 (ties to even), as a
    Python float holding that value; None for overflow (not generated)."""
    if q == 0:
        return 0.0
    sign = -1 if q < 0 else 1
    a = abs(q)
    mant_bits, emin = (24, -126) if ty == 'f32' else (53, -1022)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    # now 2^e <= a < 2^(e+1)
    quantum_e = max(e, emin) - (mant_bits - 1)
    scaled = a / (Fraction(2) ** quantum_e)
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = Fraction(n) * Fraction(2) ** quantum_e
    limit = Fraction(2) ** (128 if ty == 'f32' else 1024)
    if v >= limit:
        return None
    return sign * float(v)


def flush(x, ty, ftz):
    if x is None:
        raise OverflowError  # an operand overflowed: the caller draws new inputs
    if ftz and ty == 'f32' and x != 0 and abs(x) < 2.0 ** -126:
        return math_copysign0(x)
    return x


def math_copysign0(x):
    return -0.0 if str(x).startswith('-') else 0.0


def neg_zero(x):
    return x == 0 and str(x).startswith('-')


def exact_sum(terms, ty):
    """Round a sum of exact terms (each (Fraction, is_negative_zero_flag))."""
    total = sum((t for t, _ in terms), Fraction(0))
    if total == 0:
        # IEEE: exact zero sum is -0 only when every term is a -0.
        if all(z for _, z in terms):
            return -0.0
        return 0.0
    return round_frac(total, ty)


def term(x):
    return (Fraction(x), neg_zero(x))


def prod_term(a, b):
    p = Fraction(a) * Fraction(b)
    if p == 0:
        negz = (str(a).startswith('-')) != (str(b).startswith('-'))
        return (p, negz)
    return (p, False)


def to_ty(x, ty):
    """x (exact in ty) as the type's float value (f32 held as a Python float)."""
    return x


def sat(x):
    if x != x:
        return 0.0
    return min(max(x, 0.0), 1.0) if not neg_zero(x) else 0.0


# ---------------------------------------------------------------- programs


class V:
    """A value of the program: op, args (value indices or ('imm', float)),
    modifiers, block, and (for a guarded add) the default value."""

    def __init__(self, op, args, ty, block, rnd=False, ftz=False, sat=False, cond=False):
        self.op, self.args, self.ty, self.block = op, args, ty, block
        self.rnd, self.ftz, self.sat, self.cond = rnd, ftz, sat, cond
        self.reg = None


def gen_program(rng):
    ty = rng.choice(['f32', 'f32', 'f64'])
    prog_ftz = ty == 'f32' and rng.random() < 0.3
    n_in = 6
    vals = [V('in', [k], ty, 0) for k in range(n_in)]
    for v in vals:
        v.seg = 0
    stores = []  # value indices stored, in order (the outputs)
    n_blocks = rng.randint(1, 4)
    # Block kinds: 0 is the first; later ones start after 'label' (no
    # split), 'bra' (split, straight) or 'cond' (a block threads with p skip).
    kinds = ['first'] + [rng.choice(['label', 'bra', 'bra', 'cond']) for _ in range(n_blocks - 1)]
    block = 0
    for bk, kind in enumerate(kinds):
        # A new basic block for a conditional block and after it (its join
        # label is a branch target with two predecessors); an unused label
        # or `bra L; L:` does not start one
        # (ptxas merges `bra L; L:` when nothing else branches to L.)
        if bk > 0 and (kind == 'cond' or kinds[bk - 1] == 'cond'):
            block += 1
        cond = kind == 'cond'
        start = len(vals)

        def avail():
            # Values usable here: not from a conditional block other than this one.
            out = []
            for i, v in enumerate(vals):
                if v.op == 'store':
                    continue
                if v.cond and not (cond and i >= start):
                    continue
                out.append(i)
            return out

        def pick(prefer_recent=0.6):
            a = avail()
            recent = [i for i in a if i >= start and vals[i].op in ('mul', 'neg', 'mov')]
            if recent and rng.random() < prefer_recent:
                return rng.choice(recent)
            if rng.random() < 0.08:
                return ('imm', rand_imm(rng, ty))
            return rng.choice(a)

        def pickv(prefer_recent=0.8):
            a = avail()
            recent = [i for i in a if i >= start and vals[i].op in ('mul', 'neg', 'mov')]
            if recent and rng.random() < prefer_recent:
                return rng.choice(recent)
            return rng.choice(a)

        def ftz():
            if ty != 'f32':
                return False
            return prog_ftz if rng.random() < 0.85 else not prog_ftz

        def canon(x):
            """The value x copies, and whether negated (through mov and neg)."""
            neg = False
            while isinstance(x, int) and (vals[x].op == 'mov' or (vals[x].op == 'neg' and not vals[x].ftz)):
                neg ^= vals[x].op == 'neg'
                x = vals[x].args[0]
            return (x if isinstance(x, int) else ('imm', x[1]), neg)

        def key(v):
            # ptxas computes an expression once (x - y and -y + x too):
            # keep every one distinct.
            if v.op in ('add', 'gadd', 'sub'):
                a, b = (canon(x) for x in v.args[-2:])
                if v.op == 'sub':
                    b = (b[0], not b[1])
                return ('add', tuple(sorted((a, b), key=repr)), v.rnd, v.ftz, v.sat, v.block)
            if v.op == 'mul':
                a, b = (canon(x) for x in v.args)
                return ('mul', tuple(sorted((a[0], b[0]), key=repr)), a[1] ^ b[1], v.rnd, v.ftz, v.sat, v.block)
            if v.op in ('neg', 'abs', 'fma'):
                return (v.op, tuple(canon(x) for x in v.args), v.rnd, v.ftz, v.sat, v.block)
            return None

        seen = set(key(v) for v in vals if key(v) is not None)
        for _ in range(rng.randint(3, 10)):
            if len(vals) > start:
                k = key(vals[-1])
                if k is not None and k in seen:
                    vals.pop()
                elif k is not None:
                    seen.add(k)
            r = rng.random()
            if r < 0.30:
                vals.append(V('mul', [pick(0.2), pickv(0.2)], ty, block, rnd=rng.random() < 0.2, ftz=ftz(),
                              sat=ty == 'f32' and rng.random() < 0.05, cond=cond))
            elif r < 0.62:
                op = rng.choice(['add', 'add', 'sub'])
                vals.append(V(op, [pick(), pick()], ty, block, rnd=rng.random() < 0.2, ftz=ftz(),
                              sat=ty == 'f32' and rng.random() < 0.1, cond=cond))
            elif r < 0.70:
                vals.append(V('neg', [pickv()], ty, block, ftz=ty == 'f32' and rng.random() < 0.1, cond=cond))
            elif r < 0.76:
                vals.append(V('mov', [pickv()], ty, block, cond=cond))
            elif r < 0.80:
                vals.append(V('abs', [pickv()], ty, block, cond=cond))
            elif r < 0.85:
                vals.append(V('fma', [pick(), pick(), pick()], ty, block, ftz=ftz(), cond=cond))
            elif r < 0.91:
                # mov d, x; @p add d, a, b
                a = avail()
                vals.append(V('gadd', [rng.choice(a), pick(), pick()], ty, block, ftz=ftz(),
                              rnd=rng.random() < 0.1, cond=cond))
            else:
                vals.append(V('store', [rng.choice(avail())], ty, block, cond=cond))
        if len(vals) > start and key(vals[-1]) is not None and key(vals[-1]) in seen:
            vals.pop()
        # Store what this block leaves unused (always, in a conditional block).
        used = set()
        for v in vals:
            for x in v.args if v.op != 'in' else []:
                if isinstance(x, int):
                    used.add(x)
        for i in range(start, len(vals)):
            if vals[i].op != 'store' and i not in used:
                vals.append(V('store', [i], ty, block, cond=cond))
        for v in vals[start:]:
            v.seg = bk
    for i, v in enumerate(vals):
        if v.op == 'store':
            stores.append(i)
    return {'ty': ty, 'vals': vals, 'kinds': kinds, 'n_in': n_in, 'stores': stores}


def rand_imm(rng, ty):
    m = rng.randrange(1 << 23, 1 << 24) if ty == 'f32' else rng.randrange(1 << 52, 1 << 53)
    e = rng.randint(-4, 4)
    x = m * 2.0 ** (e - (23 if ty == 'f32' else 52))
    return -x if rng.random() < 0.5 else x


def rand_input(rng, ty):
    r = rng.random()
    if r < 0.05:
        return rng.choice([0.0, -0.0])
    if ty == 'f32' and r < 0.12:
        e = rng.randint(-149, -110)  # subnormal or tiny
        m = rng.randrange(1, 1 << 24)
        x = round_frac(Fraction(m) * Fraction(2) ** (e - 23), 'f32') or 0.0
    else:
        m = rng.randrange(1 << 23, 1 << 24) if ty == 'f32' else rng.randrange(1 << 52, 1 << 53)
        e = rng.randint(-6, 6)
        x = m * 2.0 ** (e - (23 if ty == 'f32' else 52))
    return -x if rng.random() < 0.5 else x


# ---------------------------------------------------------------- the rule


def fusion(prog):
    """The model of docs/contraction.md: {site index: (product index, slot,
    product negated)} for every add/sub that becomes a fused multiply-add."""
    vals = prog['vals']
    n = len(vals)
    consumers = [[] for _ in range(n)]  # (consumer, arg position)
    for i, v in enumerate(vals):
        if v.op == 'in':
            continue
        for k, x in enumerate(v.args):
            if isinstance(x, int):
                consumers[x].append((i, k))

    def imm_product(p):
        # ptxas recomputes a product with an immediate multiplicand where it
        # is used: its uses in other blocks are sites too.
        return any(isinstance(a, tuple) for a in vals[p].args)

    def same_block(c, p):
        return vals[c].block == vals[p].block or imm_product(p)

    def is_copy(c, src):
        v = vals[c]
        return v.op in ('mov', 'neg') and same_block(c, src) and not (v.op == 'neg' and v.ftz)

    # For each product: the sites it could be fused into, or None (escapes).
    def holders(p):
        """Values holding ±p in p's block: [(value, negated)], None if a
        copy escapes."""
        out = [(p, False)]
        k = 0
        while k < len(out):
            h, neg = out[k]
            k += 1
            for c, _ in consumers[h]:
                if vals[c].op in ('mov', 'neg'):
                    if not is_copy(c, p):
                        return None
                    out.append((c, neg ^ (vals[c].op == 'neg')))
        return out

    products = {}
    for i, v in enumerate(vals):
        if v.op == 'mul' and not v.rnd and not v.sat:
            products[i] = None
    alias_of = {}  # value -> (product, negated)
    for p in list(products):
        hs = holders(p)
        if hs is None:
            products[p] = 'escape'
            continue
        for h, neg in hs:
            alias_of[h] = (p, neg)
        products[p] = hs

    def site_ok(c, p):
        v, pv = vals[c], vals[p]
        return (v.op in ('add', 'sub') and not v.rnd and v.ftz == pv.ftz and same_block(c, p))

    sites = {}  # site -> [slot0, slot1] of (product, negated) or None
    escaped = set(p for p, h in products.items() if h == 'escape')
    for p, hs in products.items():
        if hs == 'escape':
            continue
        for h, neg in hs:
            for c, k in consumers[h]:
                cv = vals[c]
                if cv.op in ('mov', 'neg') and is_copy(c, p):
                    continue
                if cv.op == 'gadd' and k == 0:
                    escaped.add(p)  # the default of a guarded write
                    continue
                if cv.op == 'gadd':
                    # operands 1 and 2 of a guarded add are its sources
                    slot = k - 1
                    ok = (not cv.rnd and cv.ftz == vals[p].ftz and same_block(c, p))
                elif site_ok(c, p):
                    slot = k
                    ok = True
                else:
                    ok = False
                if not ok:
                    escaped.add(p)
                    continue
                srcs = cv.args[1:] if cv.op == 'gadd' else cv.args
                other = srcs[1 - slot]
                if isinstance(other, int) and other in alias_of and alias_of[other][0] == p:
                    escaped.add(p)  # both operands hold p
                    continue
                sites.setdefault(c, [None, None])[slot] = (p, neg)
    # Two passes over the sites in program order.
    uses = {}
    for c, slots in sites.items():
        for sl in slots:
            if sl is not None:
                uses[sl[0]] = uses.get(sl[0], 0) + 1
    ok = lambda p: p not in escaped and products.get(p) not in (None, 'escape')  # noqa: E731
    out = {}
    open_uses = dict(uses)
    addend = {p: 0 for p in uses}

    def fuse(c, slot):
        slots = sites[c]
        out[c] = (slots[slot][0], slot, slots[slot][1])
        for j, sl in enumerate(slots):
            if sl is not None:
                open_uses[sl[0]] -= 1
                if j != slot:
                    addend[sl[0]] += 1

    order = sorted(sites)
    for c in order:
        slots = sites[c]
        for slot in (0, 1):
            sl = slots[slot]
            if sl is not None and ok(sl[0]) and uses[sl[0]] == 1:
                fuse(c, slot)
                break
    for c in order:
        if c in out:
            continue
        slots = sites[c]
        cand = [(uses[sl[0]], slot) for slot, sl in enumerate(slots)
                if sl is not None and ok(sl[0]) and addend[sl[0]] == 0]
        if cand:
            fuse(c, min(cand)[1])
    return out


# ---------------------------------------------------------------- evaluation


def evaluate(prog, fused, inputs, p_true, q_true):
    ty = prog['ty']
    vals = prog['vals']
    res = [None] * len(vals)

    def get(x):
        if isinstance(x, tuple):
            return x[1]
        return res[x]

    def rnd(q):
        r = round_frac(q, ty)
        return r

    def fix(x, v):
        """Result rounding already done: ftz output flush, sat, f32 type."""
        x = flush(x, ty, v.ftz)
        if v.sat:
            x = sat(x)
        return x

    stored = []
    for i, v in enumerate(vals):
        if v.cond and p_true:
            continue  # the block is skipped where p holds
        fl = lambda x: flush(x, ty, v.ftz)  # noqa: E731
        if v.op == 'in':
            res[i] = inputs[v.args[0]]
        elif v.op == 'mul':
            a, b = fl(get(v.args[0])), fl(get(v.args[1]))
            res[i] = fix(exact_sum([prod_term(a, b)], ty), v)
        elif v.op in ('add', 'sub', 'gadd'):
            srcs = v.args[1:] if v.op == 'gadd' else v.args
            sub = v.op == 'sub'
            if i in fused:
                p, slot, neg = fused[i]
                pv = vals[p]
                a, b = fl(get(pv.args[0])), fl(get(pv.args[1]))
                c = fl(get(srcs[1 - slot]))
                pt = prod_term(a, b)
                if neg ^ (sub and slot == 1):
                    pt = (-pt[0], not pt[1] if pt[0] == 0 else False)
                ct = term(c)
                if sub and slot == 0:
                    ct = (-ct[0], not ct[1] if ct[0] == 0 else False)
                r = fix(exact_sum([pt, ct], ty), v)
            else:
                a, b = fl(get(srcs[0])), fl(get(srcs[1]))
                bt = term(b)
                if sub:
                    bt = (-bt[0], not bt[1] if bt[0] == 0 else False)
                r = fix(exact_sum([term(a), bt], ty), v)
            if v.op == 'gadd':
                r = r if q_true else get(v.args[0])
            res[i] = r
        elif v.op == 'neg':
            x = fl(get(v.args[0]))
            res[i] = -x
        elif v.op == 'mov':
            res[i] = get(v.args[0])
        elif v.op == 'abs':
            res[i] = abs(get(v.args[0]))
        elif v.op == 'fma':
            a, b, c = (fl(get(x)) for x in v.args)
            res[i] = fix(exact_sum([prod_term(a, b), term(c)], ty), v)
        elif v.op == 'store':
            stored.append(get(v.args[0]))
            continue
        if res[i] is None:
            raise OverflowError
    return stored


# ---------------------------------------------------------------- PTX


def imm_text(x, ty):
    if ty == 'f32':
        return '0f%08X' % f32_bits(x)
    return '0d%016X' % f64_bits(x)


def render(prog, rng):
    ty = prog['ty']
    vals = prog['vals']
    w = 4 if ty == 'f32' else 8
    rp = '%f' if ty == 'f32' else '%fd'
    n_in = prog['n_in']
    n_out = len(prog['stores'])
    # Last use of each value, and its block.
    last_use = {}
    for i, v in enumerate(vals):
        if v.op == 'in':
            continue
        for x in v.args:
            if isinstance(x, int):
                last_use[x] = i
    free = []  # (block, reg) registers whose value is dead, reusable in that block
    nreg = [0]

    def fresh():
        nreg[0] += 1
        return f'{rp}{nreg[0]}'

    def opnd(x):
        return imm_text(x[1], ty) if isinstance(x, tuple) else vals[x].reg

    lines = []
    out_k = 0
    for bk, kind in enumerate(prog['kinds']):
        label = f'$L_b{bk}'
        if kind == 'label':
            lines.append(f'{label}:')
        elif kind == 'bra':
            lines.append(f'  bra.uni {label};')
            lines.append(f'{label}:')
        elif kind == 'cond':
            lines.append(f'  bra.uni {label};')
            lines.append(f'{label}:')
            lines.append(f'  @%p1 bra $L_e{bk};')
        # values of this block kind
        for i, v in enumerate(vals):
            if v.seg != bk:
                continue
            if v.op == 'in':
                v.reg = fresh()
                lines.append(f'  ld.global.{ty} {v.reg}, [%rd4+{v.args[0] * w}];')
                if v.args[0] == n_in - 1:
                    lines.append(f'  setp.lt.{ty} %p1, {vals[0].reg}, {vals[1].reg};')
                    lines.append(f'  setp.lt.{ty} %p2, {vals[2].reg}, {vals[3].reg};')
                continue
            if v.op == 'store':
                lines.append(f'  st.global.{ty} [%rd6+{out_k * w}], {opnd(v.args[0])};')
                out_k += 1
                continue
            srcs = [opnd(x) for x in v.args]
            # Free registers whose last use is this instruction (same block only).
            for x in sorted(set(x for x in v.args if isinstance(x, int))):
                if last_use.get(x) == i and vals[x].block == v.block \
                        and vals[x].op not in ('in', 'gadd'):
                    free.append((v.block, vals[x].reg))
            reuse = [r for b, r in free if b == v.block]
            # (a product with an immediate keeps a register of its own: the
            # translator fuses it across blocks only then)
            imm_mul = v.op == 'mul' and any(isinstance(x, tuple) for x in v.args)
            if v.op != 'gadd' and not imm_mul and reuse and rng.random() < 0.5:
                r = rng.choice(reuse)
                free.remove((v.block, r))
                v.reg = r
            else:
                v.reg = fresh()
            mods = ''
            if v.rnd:
                mods += '.rn'
            if v.ftz:
                mods += '.ftz'
            if v.sat:
                mods += '.sat'
            if v.op in ('mul', 'add', 'sub'):
                lines.append(f'  {v.op}{mods}.{ty} {v.reg}, {srcs[0]}, {srcs[1]};')
            elif v.op == 'neg':
                lines.append(f'  neg{".ftz" if v.ftz else ""}.{ty} {v.reg}, {srcs[0]};')
            elif v.op == 'mov':
                lines.append(f'  mov.{ty} {v.reg}, {srcs[0]};')
            elif v.op == 'abs':
                lines.append(f'  abs.{ty} {v.reg}, {srcs[0]};')
            elif v.op == 'fma':
                lines.append(f'  fma.rn{".ftz" if v.ftz else ""}.{ty} {v.reg}, {srcs[0]}, {srcs[1]}, {srcs[2]};')
            elif v.op == 'gadd':
                m = ('.rn' if v.rnd else '') + ('.ftz' if v.ftz else '')
                lines.append(f'  mov.{ty} {v.reg}, {srcs[0]};')
                lines.append(f'  @%p2 add{m}.{ty} {v.reg}, {srcs[1]}, {srcs[2]};')
        if kind == 'cond':
            lines.append(f'$L_e{bk}:')
    # A register is reused only after the last use of its value (stores
    # are uses), in the block that defined it.
    body = '\n'.join(lines)
    head = f"""//
// Generated by tests/difftest/contract.py
//
.version 8.0
.target sm_80
.address_size 64

.visible .entry k(.param .u64 pin, .param .u64 pout, .param .u64 patom)
{{
  .reg .pred %p<3>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<8>;
  .reg .{ty} {rp}<{nreg[0] + 1}>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r1, %r2, %r3, %r1;
  mul.wide.u32 %rd3, %r1, {n_in * w};
  add.s64 %rd4, %rd1, %rd3;
  mul.wide.u32 %rd5, %r1, {max(n_out, 1) * w};
  add.s64 %rd6, %rd2, %rd5;
"""
    return head + body + '\n  ret;\n}\n'


# ---------------------------------------------------------------- driver

def sass_fma_count(ptx_path, ptxas, nvdisasm, workdir):
    cubin = os.path.join(workdir, 'k.cubin')
    r = subprocess.run([ptxas, '-arch=sm_80', '-O3', ptx_path, '-o', cubin], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError('ptxas failed: ' + r.stderr)
    r = subprocess.run([nvdisasm, '-c', cubin], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError('nvdisasm failed: ' + r.stderr)
    n = 0
    for line in r.stdout.splitlines():
        s = line.split('*/')[-1] if '*/' in line else line
        tok = s.split()
        if tok and tok[0].startswith('@'):
            tok = tok[1:]
        if tok and tok[0].split('.')[0] in ('FFMA', 'DFMA'):
            # ptxas writes a negated product -(a*b) as FFMA -a, b, -RZ:
            # one rounding either way, not a contraction.
            addend = s.split(',')[-1].strip().rstrip(';').strip()
            if addend not in ('RZ', '-RZ'):
                n += 1
    return n


def words_of(x, ty):
    if ty == 'f32':
        return [f32_bits(x)]
    b = f64_bits(x)
    return [b & 0xffffffff, b >> 32]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--lib', help='libcuda.so.1 to run the programs through (omit: no runs)')
    ap.add_argument('--ptx2spv', default=None, help='ptx2spv binary (default: target/{release,debug}/ptx2spv)')
    ap.add_argument('--ptxas', default=shutil.which('ptxas'))
    ap.add_argument('--nvdisasm', default=shutil.which('nvdisasm'))
    ap.add_argument('--require-ptxas', action='store_true',
                    help='fail when ptxas or nvdisasm is missing instead of skipping that check')
    ap.add_argument('--count', type=int, default=100)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--program', type=int, action='append', default=[],
                    help='run only this program seed (as FAIL lines print it); repeatable')
    ap.add_argument('--write-fixture', metavar='DIR', help='write each program as a cargo-test fixture in DIR')
    ap.add_argument('--note', default='', help="the fixture's note")
    ap.add_argument('--out-dir', default=None, help='where failing programs are written')
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p2s = args.ptx2spv
    if p2s is None:
        for prof in ('release', 'debug'):
            c = os.path.join(root, 'target', prof, 'ptx2spv')
            if os.path.exists(c):
                p2s = c
                break
    if p2s is None:
        sys.exit('contract.py: no ptx2spv binary; build it or pass --ptx2spv')
    drv = None
    if args.lib:
        from cuda_runner import Driver
        drv = Driver(args.lib)
    check_sass = bool(args.ptxas and args.nvdisasm)
    if args.require_ptxas and not check_sass:
        sys.exit('contract.py: ptxas or nvdisasm not found (pip nvidia-cuda-nvcc, nvidia-cuda-nvdisasm)')
    workdir = tempfile.mkdtemp(prefix='contract-')
    passed = failed = sass_checked = fused_total = 0
    seeds = args.program or [args.seed * 1_000_003 + k for k in range(args.count)]
    for seed in seeds:
        rng = random.Random(seed)
        prog = gen_program(rng)
        ptx = render(prog, rng)
        fz = fusion(prog)
        fused_total += len(fz)
        path = os.path.join(workdir, f'p{seed}.ptx')
        with open(path, 'w') as f:
            f.write(ptx)
        problems = []
        r = subprocess.run([p2s, '--print-contractions', path], capture_output=True, text=True)
        if r.returncode != 0:
            problems.append('ptx2spv failed: ' + r.stderr.strip())
        elif r.stdout.strip() != f'fused {len(fz)}':
            problems.append(f'ptx2spv {r.stdout.strip()}, model fused {len(fz)}')
        if check_sass:
            try:
                n = sass_fma_count(path, args.ptxas, args.nvdisasm, workdir)
                explicit = sum(1 for v in prog['vals'] if v.op == 'fma')
                sass_checked += 1
                if n != len(fz) + explicit:
                    problems.append(f'ptxas made {n} FFMA/DFMA, model fused {len(fz)} + {explicit} explicit fma')
            except RuntimeError as e:
                problems.append(str(e))
        if args.write_fixture:
            print('wrote', write_fixture(args.write_fixture, seed, prog, fz, ptx, random.Random(seed + 1), args.note))
        if drv is not None and not problems:
            problems += run_program(drv, prog, fz, ptx, random.Random(seed + 1))
        if problems:
            failed += 1
            print(f'FAIL seed {seed}: ' + '; '.join(problems[:3]), flush=True)
            if args.out_dir:
                os.makedirs(args.out_dir, exist_ok=True)
                shutil.copy(path, os.path.join(args.out_dir, f'contract-{seed}.ptx'))
        else:
            passed += 1
    print(f'{len(seeds)} programs: {passed} passed, {failed} failed '
          f'(fused sites: {fused_total}; ptxas checked: {sass_checked})')
    shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(1 if failed else 0)


def make_case(prog, fz, rng):
    """Random inputs for THREADS threads, the launch, and every thread's
    expected output words (POISON where a skipped block would store)."""
    ty = prog['ty']
    n_in = prog['n_in']
    n_out = len(prog['stores'])
    w = 1 if ty == 'f32' else 2
    inputs = []
    expected = []
    for t in range(THREADS):
        while True:
            ins = [rand_input(rng, ty) for _ in range(n_in)]
            if ty == 'f32':
                ins = [bits_f32(f32_bits(x)) for x in ins]
            p_true = ins[0] < ins[1]
            q_true = ins[2] < ins[3]
            try:
                out = evaluate(prog, fz, ins, p_true, q_true)
                break
            except OverflowError:
                continue
        inputs.append(ins)
        words = []
        k = 0
        for i in prog['stores']:
            if prog['vals'][i].cond and p_true:
                words += [POISON] * w
            else:
                words += words_of(out[k], ty)
                k += 1
        if not words:
            words = [POISON] * w
        expected.append(words)
    in_words = [wd for ins in inputs for x in ins for wd in words_of(x, ty)]
    case = {'kernel': 'k', 'in_words': in_words, 'out_words': THREADS * max(n_out, 1) * w,
            'atom_words': 1, 'atom_init': [0], 'grid': [THREADS // 64, 1, 1], 'block': [64, 1, 1]}
    return case, expected, inputs


def run_program(drv, prog, fz, ptx, rng):
    case, expected, inputs = make_case(prog, fz, rng)
    mod = drv.load(ptx)
    try:
        got, _ = drv.run_case(mod, case)
    finally:
        drv.unload(mod)
    problems = []
    per = len(expected[0])
    for t in range(THREADS):
        g = got[t * per:(t + 1) * per]
        if g != expected[t]:
            problems.append(f'thread {t}: got {[hex(x) for x in g]}, expected {[hex(x) for x in expected[t]]}, '
                            f'inputs {inputs[t]}')
            break
    return problems


def write_fixture(outdir, seed, prog, fz, ptx, rng, note):
    """A fixture for tests/tests/difftest_fixtures.rs: kernel.ptx, case.json
    with the model's expected words, cmd.txt."""
    case, expected, _ = make_case(prog, fz, rng)
    d = os.path.join(outdir, f'contract_seed{seed}')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'kernel.ptx'), 'w') as f:
        f.write(ptx)
    case.update({'expected_out': [wd for row in expected for wd in row], 'expected_atom': [0],
                 'seed': seed, 'mode': 'contract', 'note': note})
    import json
    with open(os.path.join(d, 'case.json'), 'w') as f:
        json.dump(case, f)
    with open(os.path.join(d, 'cmd.txt'), 'w') as f:
        f.write(f'python3 tests/difftest/contract.py --program {seed} --write-fixture tests/difftest/fixtures '
                f'(generated PTX; expected words from the exact model of docs/contraction.md)\n')
    return d


if __name__ == '__main__':
    main()
