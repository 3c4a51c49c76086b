"""Random CUDA kernel generator for the ptxvk differential tester.

A program is an AST of the classes below; `Program.render(prefix)` gives the
CUDA C++ text of its `__noinline__` device functions and its kernel. The same
text compiles with nvcc (device) and g++ (host reference, see prelude.py).

Rules that keep every program free of UB and data races (see README.md):
  * integer + - * and negation are done in the unsigned type of the operand
    width (>= 32 bits) and cast back; shift counts are masked; / and % go
    through dt_div/dt_mod (zero divisor, MIN / -1 guarded);
  * float -> int conversions go through range-checked helpers;
  * every loop has a small bound (a counter or a hidden guard counter);
  * __syncthreads / warp intrinsics only in block- (warp-) uniform control
    flow, never after a possible early return, warp intrinsics only when the
    block size is a multiple of 32;
  * shared memory: thread t writes sm[t], a barrier, any thread reads, a
    barrier; shared/global atomic counters each have one fixed commutative
    operation and the returned old value is discarded;
  * each thread writes only its own output words o[0..W).
"""

import random
import struct
import threading

# ---------------------------------------------------------------- types

INTS = {
    'u8': ('unsigned char', 8, False), 'i8': ('signed char', 8, True),
    'u16': ('unsigned short', 16, False), 'i16': ('short', 16, True),
    'u32': ('unsigned', 32, False), 'i32': ('int', 32, True),
    'u64': ('unsigned long long', 64, False), 'i64': ('long long', 64, True),
}
FLTS = {'f32': 'float', 'f64': 'double'}
ALL_TYPES = list(INTS) + list(FLTS)
TYPE_WEIGHTS = {'u8': 1, 'i8': 1, 'u16': 1, 'i16': 1, 'u32': 5, 'i32': 5,
                'u64': 2, 'i64': 2, 'f32': 4, 'f64': 2}


def cty(t):
    if t in INTS:
        return INTS[t][0]
    if t in FLTS:
        return FLTS[t]
    assert t == 'bool'
    return 'bool'


def isint(t):
    return t in INTS


def isflt(t):
    return t in FLTS


def width(t):
    return INTS[t][1]


def signed(t):
    return INTS[t][2]


def utype(t):
    return 'unsigned long long' if width(t) == 64 else 'unsigned'


def wrap_int(t, v):
    w = width(t)
    v &= (1 << w) - 1
    if signed(t) and v >= 1 << (w - 1):
        v -= 1 << w
    return v


IN_WORDS = 256     # words of `in` per case (power of two: indices are masked)
ARR = 8            # local array la[ARR]
SM_WORDS = 256     # shared array sm[SM_WORDS] >= max threads per block
N_ATOM = 16        # atom[0..8): global counters, atom[8..16): flushed shared counters
ATOM_OPS = ['add', 'and', 'or', 'xor', 'umin', 'umax', 'imin', 'imax']
ATOM_INIT = {'add': 0, 'and': 0xffffffff, 'or': 0, 'xor': 0, 'umin': 0xffffffff,
             'umax': 0, 'imin': 0x7fffffff, 'imax': 0x80000000}


def atom_init():
    return [ATOM_INIT[ATOM_OPS[k % 8]] for k in range(N_ATOM)]


def atom_call(k, target, val):
    op = ATOM_OPS[k % 8]
    fn = {'add': 'atomicAdd', 'and': 'atomicAnd', 'or': 'atomicOr', 'xor': 'atomicXor',
          'umin': 'atomicMin', 'umax': 'atomicMax', 'imin': 'atomicMin', 'imax': 'atomicMax'}[op]
    if op in ('imin', 'imax'):
        return f'{fn}((int*)&{target}[{k}], (int)({val}))'
    return f'{fn}(&{target}[{k}], (unsigned)({val}))'


AVOID = set()   # known ptxvk bugs to steer around: 'fdiv0' (float x / 0)
FEATURES = set()  # optional statement kinds: 'poll' (polling loops), 'lock' (a shared spin lock), 'spin' (both),
# 'warpsync' (warp-synchronous shared exchanges that rely on lock step)
_PFX = ['p0']   # name prefix while rendering (under _RENDER_LOCK)
_RENDER_LOCK = threading.Lock()


def ind(n):
    return '  ' * n


# ---------------------------------------------------------------- AST
# Node._f: list of (attribute, kind); kind: 'e' expression, 'el' list of
# expressions, 's' statement list, 'c' list of Case. Used by the minimizer.

class Node:
    _f = ()


class Expr(Node):
    ty = None
    no_lift = False   # must not be replaced by a child (uniform conditions)

    def r(self):
        raise NotImplementedError


class Var(Expr):
    def __init__(self, name, ty):
        self.name, self.ty = name, ty

    def r(self):
        return self.name


class Const(Expr):
    def __init__(self, ty, v):
        self.ty, self.v = ty, v

    def r(self):
        t, v = self.ty, self.v
        if t == 'bool':
            return 'true' if v else 'false'
        if isint(t):
            if t == 'u32':
                return f'{v}u'
            if t == 'u64':
                return f'{v}ull'
            if t == 'i32':
                return '(-2147483647 - 1)' if v == -2**31 else f'({v})'
            if t == 'i64':
                return '(-9223372036854775807ll - 1)' if v == -2**63 else f'({v}ll)'
            return f'(({cty(t)}){v})'
        if t == 'f32':
            bits = struct.unpack('<I', struct.pack('<f', v))[0]
            if v != v or v in (float('inf'), float('-inf')):
                return f'dt_u2f({bits:#x}u)'
            return f'({v.hex()}f)'
        bits = struct.unpack('<Q', struct.pack('<d', v))[0]
        if v != v or v in (float('inf'), float('-inf')):
            return f'dt_u2d({bits & 0xffffffff:#x}u, {bits >> 32:#x}u)'
        return f'({v.hex()})'


class Raw(Expr):
    """A builtin value (ltid, gtid, ...) of type u32."""

    def __init__(self, text, ty='u32'):
        self.text, self.ty = text, ty

    def r(self):
        return self.text


class Load(Expr):
    _f = (('i', 'e'),)

    def __init__(self, i, ty='u32'):
        self.i, self.ty = i, ty

    def r(self):
        x = f'in[({self.i.r()}) & {IN_WORDS - 1}u]'
        return f'dt_u2f({x})' if self.ty == 'f32' else x


class ArrRd(Expr):
    _f = (('i', 'e'),)
    ty = 'u32'

    def __init__(self, i):
        self.i = i

    def r(self):
        return f'la[({self.i.r()}) & {ARR - 1}u]'


class Bin(Expr):
    _f = (('a', 'e'), ('b', 'e'))

    def __init__(self, op, a, b):
        self.op, self.a, self.b, self.ty = op, a, b, a.ty

    def r(self):
        t, op, a, b = self.ty, self.op, self.a.r(), self.b.r()
        if isflt(t):
            if op == '/' and 'fdiv0' in AVOID:
                return f'({a} / dt_nz({b}))'
            return f'({a} {op} {b})'
        c, u, w = cty(t), utype(t), width(t)
        if op in '+-*':
            return f'(({c})(({u})({a}) {op} ({u})({b})))'
        if op in '&|^':
            return f'(({c})(({a}) {op} ({b})))'
        if op == '<<':
            return f'(({c})(({u})({a}) << (({b}) & {w - 1})))'
        if op == '>>':
            if signed(t):
                return f'(({c})(({a}) >> (({b}) & {w - 1})))'
            return f'(({c})(({u})({a}) >> (({b}) & {w - 1})))'
        if op in '/%':
            fn = 'dt_div' if op == '/' else 'dt_mod'
            if w < 32:
                bt = 'int' if signed(t) else 'unsigned'
                return f'(({c}){fn}(({bt})({a}), ({bt})({b})))'
            return f'{fn}({a}, {b})'
        raise ValueError(op)


class Un(Expr):
    _f = (('a', 'e'),)

    def __init__(self, op, a):
        self.op, self.a, self.ty = op, a, a.ty

    def r(self):
        t, a = self.ty, self.a.r()
        if isflt(t):
            return f'(-({a}))'
        c, u = cty(t), utype(t)
        if self.op == '-':
            return f'(({c})(({u})0 - ({u})({a})))'
        return f'(({c})(~({u})({a})))'


class FFn(Expr):
    """fma / sqrt / fmin / fmax / fabs on f32 or f64."""

    def __init__(self, fn, args):
        self.fn, self.args, self.ty = fn, args, args[0].ty

    _f = (('args', 'el'),)

    def r(self):
        s = 'f' if self.ty == 'f32' else ''
        a = ', '.join(x.r() for x in self.args)
        if self.fn in ('fmin', 'fmax'):
            # + 0 turns a -0 result into +0: fmin(-0, +0) may return either zero
            return f'({self.fn}{s}({a}) + 0.0{s})'
        return f'{self.fn}{s}({a})'


class Cmp(Expr):
    _f = (('a', 'e'), ('b', 'e'))
    ty = 'bool'

    def __init__(self, op, a, b):
        self.op, self.a, self.b = op, a, b

    def r(self):
        return f'(({self.a.r()}) {self.op} ({self.b.r()}))'


class Logic(Expr):
    _f = (('a', 'e'), ('b', 'e'))
    ty = 'bool'

    def __init__(self, op, a, b):
        self.op, self.a, self.b = op, a, b

    def r(self):
        return f'({self.a.r()} {self.op} {self.b.r()})'


class Not(Expr):
    _f = (('a', 'e'),)
    ty = 'bool'

    def __init__(self, a):
        self.a = a

    def r(self):
        return f'(!{self.a.r()})'


class Cast(Expr):
    _f = (('a', 'e'),)

    def __init__(self, ty, a):
        self.ty, self.a = ty, a

    def r(self):
        t, s, a = self.ty, self.a.ty, self.a.r()
        if isint(t) and isflt(s):
            w, sg = width(t), signed(t)
            pre = 'dt_f2' if s == 'f32' else 'dt_d2'
            if w <= 32:
                fn = pre + ('i' if sg else 'u')
            else:
                fn = pre + ('l' if sg else 'ul')
            return f'(({cty(t)}){fn}({a}))'
        return f'(({cty(t)})({a}))'


class Sel(Expr):
    _f = (('c', 'e'), ('a', 'e'), ('b', 'e'))

    def __init__(self, c, a, b):
        self.c, self.a, self.b, self.ty = c, a, b, a.ty

    def r(self):
        return f'({self.c.r()} ? {self.a.r()} : {self.b.r()})'


class Call(Expr):
    _f = (('args', 'el'),)

    def __init__(self, fi, ty, args):
        self.fi, self.ty, self.args = fi, ty, args

    def r(self):
        a = ''.join(', ' + x.r() for x in self.args)
        return f'{_PFX[0]}_f{self.fi}(in{a})'


class Warp(Expr):
    """A warp intrinsic; only ever the (cast) right side of an Assign in
    warp-uniform code."""
    _f = (('a', 'e'), ('b', 'e'))

    def __init__(self, fn, ty, a, b=None, width=32):
        self.fn, self.ty, self.a, self.b, self.width = fn, ty, a, b, width

    def r(self):
        fn, a = self.fn, self.a.r()
        if fn in ('__shfl_sync', '__shfl_up_sync', '__shfl_down_sync', '__shfl_xor_sync'):
            w = '' if self.width == 32 else f', {self.width}'
            return f'{fn}(DT_FULL, {a}, {self.b.r()}{w})'
        if fn in ('__ballot_sync', '__any_sync', '__all_sync'):
            return f'{fn}(DT_FULL, {a})'
        if fn.startswith('__reduce'):
            return f'{fn}(DT_FULL, {a})'
        if fn.startswith('__syncthreads_'):
            return f'{fn}({a})'
        raise ValueError(fn)


class ShRd(Expr):
    """sm[idx % nthr]; only the right side of the read of a ShXchg."""
    _f = (('i', 'e'),)
    ty = 'u32'

    def __init__(self, i):
        self.i = i

    def r(self):
        return f'sm[({self.i.r()}) % nthr]'


class UCond(Expr):
    """A block- or warp-uniform condition: template with {p} for a predicate."""
    _f = (('p', 'e'),)
    ty = 'bool'
    no_lift = True

    def __init__(self, tmpl, p=None):
        self.tmpl, self.p = tmpl, p

    def r(self):
        return '(' + self.tmpl.format(p=self.p.r() if self.p is not None else '') + ')'


# ---- statements

class Stmt(Node):
    def lines(self, n):
        raise NotImplementedError


def render_list(body, n):
    out = []
    for s in body:
        out += s.lines(n)
    return out


class Assign(Stmt):
    _f = (('e', 'e'),)

    def __init__(self, var, e):
        self.var, self.e = var, e

    def lines(self, n):
        return [f'{ind(n)}{self.var.name} = {self.e.r()};']


class ArrSt(Stmt):
    _f = (('i', 'e'), ('e', 'e'))

    def __init__(self, i, e):
        self.i, self.e = i, e

    def lines(self, n):
        return [f'{ind(n)}la[({self.i.r()}) & {ARR - 1}u] = {self.e.r()};']


class Store(Stmt):
    _f = (('e', 'e'),)

    def __init__(self, j, e):
        self.j, self.e = j, e

    def lines(self, n):
        return [f'{ind(n)}o[{self.j}] = dt_h({self.e.r()});']


class Atom(Stmt):
    _f = (('e', 'e'),)

    def __init__(self, shared, k, e):
        self.shared, self.k, self.e = shared, k, e

    def lines(self, n):
        return [f'{ind(n)}{atom_call(self.k, "sc" if self.shared else "atom", self.e.r())};']


def sc_update(k, cur, val):
    """The value shared counter k gets from `cur` and `val` (its atomic's operation)."""
    op = ATOM_OPS[k % 8]
    if op in ('add', 'and', 'or', 'xor'):
        return f'{cur} {dict(add="+", **{"and": "&", "or": "|", "xor": "^"})[op]} {val}'
    if op in ('umin', 'umax'):
        return f'({val} {"<" if op == "umin" else ">"} {cur} ? {val} : {cur})'
    return f'((int){val} {"<" if op == "imin" else ">"} (int){cur} ? {val} : {cur})'


class Locked(Stmt):
    """Shared counter k updated with plain loads and stores under a block-wide
    spin lock (feature 'spin'): lanes of one warp contend for the lock."""
    _f = (('e', 'e'),)

    def __init__(self, k, e):
        self.k, self.e = k, e

    def lines(self, n):
        v = f'(unsigned)({self.e.r()})'
        return [f'{ind(n)}dt_lock(&slk);',
                f'{ind(n)}{{ volatile unsigned* s = sc; unsigned x = {v}; s[{self.k}] = {sc_update(self.k, f"s[{self.k}]", "x")}; }}',
                f'{ind(n)}dt_unlock(&slk);']


class Poll(Stmt):
    """{ unsigned g = 0; while ((dt_poll(in, idx + g * stride) & mask) != c && g < n) { ++g; body } var += g; }
    (feature 'spin'): a loop that polls memory through volatile loads, so
    the translator takes it for a spin loop (interleaving, unrolling), and
    counts its polls in a register read after it."""
    _f = (('idx', 'e'), ('body', 's'))

    def __init__(self, g, n, idx, stride, mask, c, var, body):
        self.g, self.n, self.idx, self.stride, self.mask, self.c, self.var, self.body = g, n, idx, stride, mask, c, var, body

    def lines(self, n):
        g = self.g
        cond = f'(dt_poll(in, ({self.idx.r()}) + {g} * {self.stride}u) & {self.mask}u) != {self.c}u && {g} < {self.n}u'
        out = [f'{ind(n)}{{', f'{ind(n + 1)}unsigned {g} = 0;']
        if self.body:
            out += [f'{ind(n + 1)}while ({cond}) {{', f'{ind(n + 2)}++{g};'] + render_list(self.body, n + 2) + [f'{ind(n + 1)}}}']
        else:
            out += [f'{ind(n + 1)}while ({cond}) ++{g};']
        v = self.var
        return out + [f'{ind(n + 1)}{v.name} = ({cty(v.ty)})({v.name} + ({cty(v.ty)}){g});', f'{ind(n)}}}']


class If(Stmt):
    _f = (('c', 'e'), ('then', 's'), ('els', 's'))

    def __init__(self, c, then, els):
        self.c, self.then, self.els = c, then, els

    def lines(self, n):
        out = [f'{ind(n)}if ({self.c.r()}) {{'] + render_list(self.then, n + 1)
        if self.els:
            out += [f'{ind(n)}}} else {{'] + render_list(self.els, n + 1)
        return out + [f'{ind(n)}}}']


class For(Stmt):
    """for (unsigned iv = 0; iv < ((bound & mask) + lo); ++iv)"""
    _f = (('bound', 'e'), ('body', 's'))

    def __init__(self, iv, bound, mask, lo, body):
        self.iv, self.bound, self.mask, self.lo, self.body = iv, bound, mask, lo, body

    def lines(self, n):
        return ([f'{ind(n)}for (unsigned {self.iv} = 0; {self.iv} < (({self.bound.r()}) & {self.mask}u) + {self.lo}u; ++{self.iv}) {{']
                + render_list(self.body, n + 1) + [f'{ind(n)}}}'])


class GridStride(Stmt):
    """for (unsigned iv = gtid; iv < ntot * k + extra; iv += ntot)"""
    _f = (('body', 's'),)

    def __init__(self, iv, k, extra, body):
        self.iv, self.k, self.extra, self.body = iv, k, extra, body

    def lines(self, n):
        return ([f'{ind(n)}for (unsigned {self.iv} = gtid; {self.iv} < ntot * {self.k}u + {self.extra}u; {self.iv} += ntot) {{']
                + render_list(self.body, n + 1) + [f'{ind(n)}}}'])


class While(Stmt):
    """{ unsigned g = 0; while (c) { if (++g > N) break; body } }  (or do-while)"""
    _f = (('c', 'e'), ('body', 's'))

    def __init__(self, g, n, c, body, do):
        self.g, self.n, self.c, self.body, self.do = g, n, c, body, do

    def lines(self, n):
        g = self.g
        head = [f'{ind(n)}{{', f'{ind(n + 1)}unsigned {g} = 0;']
        guard = [f'{ind(n + 2)}if (++{g} > {self.n}u) break;']
        body = render_list(self.body, n + 2)
        if self.do:
            return head + [f'{ind(n + 1)}do {{'] + guard + body + [f'{ind(n + 1)}}} while ({self.c.r()});', f'{ind(n)}}}']
        return head + [f'{ind(n + 1)}while ({self.c.r()}) {{'] + guard + body + [f'{ind(n + 1)}}}', f'{ind(n)}}}']


class Case(Node):
    _f = (('body', 's'),)

    def __init__(self, vals, body, brk):
        self.vals, self.body, self.brk = vals, body, brk   # vals None: default


class Switch(Stmt):
    _f = (('e', 'e'), ('cases', 'c'))

    def __init__(self, e, mask, cases):
        self.e, self.mask, self.cases = e, mask, cases

    def lines(self, n):
        out = [f'{ind(n)}switch (({self.e.r()}) & {self.mask}u) {{']
        for c in self.cases:
            lab = ' '.join('default:' if v is None else f'case {v}u:' for v in c.vals)
            out += [f'{ind(n)}{lab} {{'] + render_list(c.body, n + 1)
            out += [f'{ind(n)}}}' + (' break;' if c.brk else '')]
        return out + [f'{ind(n)}}}']


class Simple(Stmt):
    """break; continue; return; __syncthreads(); __syncwarp();"""

    def __init__(self, text):
        self.text = text

    def lines(self, n):
        return [f'{ind(n)}{self.text}']


class Return(Stmt):
    _f = (('e', 'e'),)

    def __init__(self, e):
        self.e = e

    def lines(self, n):
        return [f'{ind(n)}return {self.e.r()};']


class Block(Stmt):
    """{ body  label: ; }  -- gotos inside body jump forward to the label."""
    _f = (('body', 's'),)

    def __init__(self, label, body):
        self.label, self.body = label, body

    def lines(self, n):
        return [f'{ind(n)}{{'] + render_list(self.body, n + 1) + [f'{ind(n)}{self.label}: ;', f'{ind(n)}}}']


class Scope(Stmt):
    """{ unsigned iv = init; body }  -- a loop unwrapped by the minimizer."""
    _f = (('body', 's'),)

    def __init__(self, iv, init, body):
        self.iv, self.init, self.body = iv, init, body

    def lines(self, n):
        return [f'{ind(n)}{{', f'{ind(n + 1)}unsigned {self.iv} = {self.init};'] + render_list(self.body, n + 1) + [f'{ind(n)}}}']


class ShXchg(Stmt):
    """sm[ltid] = src; __syncthreads(); var = (T)sm[idx % nthr]; __syncthreads();"""
    _f = (('src', 'e'), ('rd', 'e'))

    def __init__(self, src, var, rd):
        self.src, self.var, self.rd = src, var, rd

    def lines(self, n):
        return [f'{ind(n)}sm[ltid] = {self.src.r()};', f'{ind(n)}__syncthreads();',
                f'{ind(n)}{self.var.name} = {self.rd.r()};', f'{ind(n)}__syncthreads();']


class WarpLockstep(Stmt):
    """A warp-synchronous exchange through shared memory with no `__syncwarp`
    between its two accesses (feature 'warpsync'): the code relies on the 32
    lanes of a converged warp running in lock step, as legacy CUDA does. Each
    warp owns a 32-word slice of `dt_wv` (volatile) or `dt_wp` (plain):
      publish (volatile): w[lane] = src; r = w[idx & 31];           (read after write)
      overwrite (volatile): r = w[idx & 31]; w[lane] = f(r, src);   (write after read)
      overwrite (plain):  __syncwarp(); r = p[idx & 31]; p[lane] = f(r, src);
    then var = (T)r. `DT_LOCKSTEP()` is empty on the device and `__syncwarp()`
    in the host reference, which so gives lock step's order: before the
    statement (after the accesses of the one before) and between its two
    accesses. The plain form starts with a real `__syncwarp()` so that its
    read of other lanes' earlier stores is ordered (ptxvk makes plain
    shared loads no lock-step point); its index is an expression nvcc cannot
    tell apart from the lane, so it keeps the load before the store.
    With spin loops in the program (features spin, lock, poll) every form
    starts with a real `__syncwarp()`: ptxvk gives no lock step to accesses
    that a spin loop reaches before a wall (a lock's critical section may be
    there; `translator/src/emit/lockstep.rs`, "Limits")."""
    _f = (('src', 'e'), ('idx', 'e'))

    def __init__(self, form, var, src, idx, r):
        self.form, self.var, self.src, self.idx, self.r_ = form, var, src, idx, r

    def lines(self, n):
        i, r = ind(n), self.r_
        first = '__syncwarp();' if FEATURES & {'spin', 'lock', 'poll'} else 'DT_LOCKSTEP();'
        src, idx = f'(unsigned)({self.src.r()})', f'(({self.idx.r()}) & 31u)'
        mix = f'({r} * 2654435761u ^ {src})'
        val = Cast(self.var.ty, Raw(r)).r() if self.var.ty != 'u32' else r
        if self.form == 'publish':
            body = [f'{i}  volatile unsigned* w = dt_wv + (ltid & ~31u);', f'{i}  {first}',
                    f'{i}  w[lane] = {src};', f'{i}  DT_LOCKSTEP();', f'{i}  unsigned {r} = w[{idx}];']
        elif self.form == 'overwrite':
            body = [f'{i}  volatile unsigned* w = dt_wv + (ltid & ~31u);', f'{i}  {first}',
                    f'{i}  unsigned {r} = w[{idx}];', f'{i}  DT_LOCKSTEP();', f'{i}  w[lane] = {mix};']
        else:
            body = [f'{i}  unsigned* w = dt_wp + (ltid & ~31u);', f'{i}  __syncwarp();',
                    f'{i}  unsigned {r} = w[{idx}];', f'{i}  DT_LOCKSTEP();', f'{i}  w[lane] = {mix};']
        return [f'{i}{{'] + body + [f'{i}  {self.var.name} = {val};', f'{i}}}']


class UFor(Stmt):
    """for (unsigned u = 0; u < C; ++u) with uniform body (no break)."""
    _f = (('body', 's'),)

    def __init__(self, iv, c, body):
        self.iv, self.c, self.body = iv, c, body

    def lines(self, n):
        return ([f'{ind(n)}for (unsigned {self.iv} = 0; {self.iv} < {self.c}u; ++{self.iv}) {{']
                + render_list(self.body, n + 1) + [f'{ind(n)}}}'])


class Func(Node):
    _f = (('body', 's'), ('ret', 'e'))

    def __init__(self, idx, rty, params, locs, body, ret):
        self.idx, self.rty, self.params, self.locs, self.body, self.ret = idx, rty, params, locs, body, ret

    def text(self):
        ps = ''.join(f', {cty(v.ty)} {v.name}' for v in self.params)
        out = [f'extern "C" __device__ __noinline__ {cty(self.rty)} {_PFX[0]}_f{self.idx}(const unsigned* __restrict__ in{ps}) {{']
        for v, init in self.locs:
            out.append(f'  {cty(v.ty)} {v.name} = {init.r()};')
        out += render_list(self.body, 1)
        out.append(f'  return {self.ret.r()};')
        out.append('}')
        return '\n'.join(out)


class Program(Node):
    _f = (('funcs', 'fl'), ('ubody', 's'), ('fbody', 's'))

    def __init__(self):
        self.funcs = []
        self.vars = []      # (Var, init expr)
        self.ubody = []     # uniform part
        self.fbody = []     # final part (early returns allowed)
        self.finals = []    # Var per output word
        self.grid = (1, 1, 1)
        self.block = (32, 1, 1)
        self.W = 4
        self.sc_read = 0
        self.vs = None
        self.seed = 0

    @property
    def nthr(self):
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def ntot(self):
        return self.nthr * self.grid[0] * self.grid[1] * self.grid[2]

    def out_words(self):
        return self.ntot * self.W

    def kernel_name(self, prefix):
        return f'{prefix}_k'

    def render(self, prefix):
        with _RENDER_LOCK:
            return self._render(prefix)

    def _render(self, prefix):
        _PFX[0] = prefix
        out = [f'// difftest program seed={self.seed} grid={list(self.grid)} block={list(self.block)} W={self.W}']
        for f in self.funcs:
            out.append(f.text())
        out.append(f'extern "C" __global__ void {prefix}_k(const unsigned* __restrict__ in, '
                   'unsigned* __restrict__ out, unsigned* __restrict__ atom) {')
        out += [
            '  const unsigned ltid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);',
            '  const unsigned nthr = blockDim.x * blockDim.y * blockDim.z;',
            '  const unsigned bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);',
            '  const unsigned gtid = bid * nthr + ltid;',
            '  const unsigned ntot = nthr * gridDim.x * gridDim.y * gridDim.z;',
            '  const unsigned lane = ltid & 31u;',
            '  const unsigned wid = ltid >> 5;',
            f'  unsigned* const o = out + gtid * {self.W}u;',
            f'  __shared__ unsigned sm[{SM_WORDS}];',
            '  __shared__ unsigned sc[8];',
        ]
        if FEATURES & {'spin', 'lock'}:
            out.append('  __shared__ unsigned slk;')
        if FEATURES & {'warpsync', 'warpsync_plain'}:
            out.append(f'  __shared__ unsigned dt_wv[{SM_WORDS}], dt_wp[{SM_WORDS}];')
            # Every word, also those of lanes a partial block lacks (the
            # minimizer shrinks blocks).
            out.append(f'  for (unsigned i = ltid; i < {SM_WORDS}u; i += nthr) {{')
            out.append(f'    dt_wv[i] = in[(bid * {SM_WORDS}u + i * 3u + 11u) & {IN_WORDS - 1}u];')
            out.append(f'    dt_wp[i] = in[(bid * {SM_WORDS}u + i * 5u + 29u) & {IN_WORDS - 1}u];')
            out.append('  }')
        out.append('  if (ltid == 0) {')
        if FEATURES & {'spin', 'lock'}:
            out.append('    slk = 0u;')
        for k in range(8):
            out.append(f'    sc[{k}] = {ATOM_INIT[ATOM_OPS[k]]:#x}u;')
        out.append('  }')
        for v, init in self.vars:
            out.append(f'  {cty(v.ty)} {v.name} = {init.r()};')
        la = ', '.join(f'in[(gtid + {k * 37}u) & {IN_WORDS - 1}u]' for k in range(ARR))
        out.append(f'  unsigned la[{ARR}] = {{{la}}};')
        out.append('  __syncthreads();')
        out += render_list(self.ubody, 1)
        out.append('  __syncthreads();')
        out.append('  if (ltid == 0) {')
        for k in range(8):
            out.append(f'    {atom_call(8 + k, "atom", f"sc[{k}]")};')
        out.append('  }')
        out.append(f'  {self.vs.name} = sc[{self.sc_read}];')
        out += render_list(self.fbody, 1)
        for j, v in enumerate(self.finals):
            out.append(f'  o[{j}] = dt_h({v.r()});')
        out.append('}')
        return '\n'.join(out) + '\n'


# ---------------------------------------------------------------- generator

F32_POOL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -2.5, 0.1, 10.0, 100.0, 1e30, -1e30, 3.4028234663852886e38,
            1.1754943508222875e-38, 1e-45, 1e-40, 16777216.0, 2147483648.0, -2147483648.0, 4294967296.0,
            0.75, 1e-3, float('inf'), float('-inf'), float('nan')]
F64_POOL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 0.1, 1e300, -1e300, 1e-310, 5e-324, 2.0**53, 2.0**63,
            -(2.0**63), 2.0**64, 4294967296.0, 1e-3, float('inf'), float('-inf'), float('nan')]
INT_POOL = [0, 1, 2, 3, 5, 7, 8, 15, 16, 31, 32, 63, 64, 100, 127, 128, 255, 256, 1000, 65535, 65536,
            0x7fffffff, 0x80000000, 0xffffffff, 0x7fffffffffffffff, 0x8000000000000000, 0xffffffffffffffff]


def f32r(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


class Ctx:
    def __init__(self, **kw):
        self.vars = []       # assignable Vars
        self.ro = []         # read-only u32 values (builtins, loop counters)
        self.uvals = []      # uniform loop counters (names)
        self.loop = False    # `continue` allowed
        self.brk = False     # `break` allowed
        self.labels = []
        self.mult = 1        # iterations of the enclosing loops
        self.maxmult = 200
        self.depth = 0
        self.ret = None      # None: no return; 'kernel': return; ; type: return expr
        self.uni = None      # None, 'warp', 'block'
        self.kernel = True
        self.shatom = False  # shared atomics allowed
        self.funcs = []      # callable Funcs
        self.callbudget = 400
        self.__dict__.update(kw)

    def sub(self, **kw):
        c = Ctx()
        c.__dict__.update(self.__dict__)
        c.__dict__.update(kw)
        return c


class Gen:
    def __init__(self, seed, features=None):
        self.R = random.Random(seed)
        self.seed = seed
        self.n = 0
        self.warp_ok = False

    def fresh(self, p):
        self.n += 1
        return f'{p}{self.n}'

    def chance(self, p):
        return self.R.random() < p

    def pick_ty(self):
        ts = list(TYPE_WEIGHTS)
        return self.R.choices(ts, [TYPE_WEIGHTS[t] for t in ts])[0]

    # ---- expressions
    def const(self, t):
        R = self.R
        if t == 'bool':
            return Const(t, R.random() < 0.5)
        if isint(t):
            v = R.choice(INT_POOL) if R.random() < 0.6 else R.getrandbits(width(t))
            if R.random() < 0.3:
                v = -v
            return Const(t, wrap_int(t, v))
        if t == 'f32':
            v = R.choice(F32_POOL) if R.random() < 0.7 else R.randint(-64, 64) / 8
            if R.random() < 0.2:
                v = -v
            return Const(t, f32r(v))
        v = R.choice(F64_POOL) if R.random() < 0.7 else R.randint(-64, 64) / 8
        return Const(t, -v if R.random() < 0.2 else v)

    def leaf(self, t, cx):
        R = self.R
        same = [v for v in cx.vars if v.ty == t]
        r = R.random()
        if same and r < 0.45:
            return R.choice(same)
        if r < 0.6:
            return self.const(t)
        if r < 0.72:
            base = 'gtid' if cx.kernel else 'threadIdx.x'
            idx = self.expr('u32', 1, cx) if R.random() < 0.5 else Raw(f'{base} * {R.randint(1, 9)}u + {R.randint(0, 255)}u')
            if t == 'f32':
                return Load(idx, 'f32')
            return Cast(t, Load(idx)) if t != 'u32' else Load(idx)
        if r < 0.85 and cx.ro:
            x = R.choice(cx.ro)
            return x if t == 'u32' else Cast(t, x)
        if cx.vars:
            v = R.choice(cx.vars)
            return v if v.ty == t else Cast(t, v)
        return self.const(t)

    def expr(self, t, d, cx):
        R = self.R
        if t == 'bool':
            return self.cond(d, cx)
        if d <= 0 or R.random() < 0.25:
            return self.leaf(t, cx)
        r = R.random()
        if isint(t):
            if r < 0.45:
                op = R.choice(['+', '-', '*', '&', '|', '^', '<<', '>>', '/', '%', '+', '-', '^'])
                return Bin(op, self.expr(t, d - 1, cx), self.expr(t, d - 1, cx))
            if r < 0.52:
                return Un(R.choice('-~'), self.expr(t, d - 1, cx))
            if r < 0.62:
                return Sel(self.cond(d - 1, cx), self.expr(t, d - 1, cx), self.expr(t, d - 1, cx))
            if r < 0.8:
                s = self.pick_ty()
                return Cast(t, self.expr(s, d - 1, cx))
            if r < 0.88 and cx.kernel:
                x = ArrRd(self.expr('u32', d - 1, cx))
                return x if t == 'u32' else Cast(t, x)
            if r < 0.95:
                c = self.call(t, d, cx)
                if c is not None:
                    return c
            return self.leaf(t, cx)
        # float
        if r < 0.45:
            return Bin(R.choice('+-*/'), self.expr(t, d - 1, cx), self.expr(t, d - 1, cx))
        if r < 0.6:
            fn = R.choice(['fma', 'sqrt', 'fmin', 'fmax', 'fabs', 'fma'])
            n = {'fma': 3, 'sqrt': 1, 'fabs': 1}.get(fn, 2)
            return FFn(fn, [self.expr(t, d - 1, cx) for _ in range(n)])
        if r < 0.65:
            return Un('-', self.expr(t, d - 1, cx))
        if r < 0.75:
            return Sel(self.cond(d - 1, cx), self.expr(t, d - 1, cx), self.expr(t, d - 1, cx))
        if r < 0.92:
            return Cast(t, self.expr(self.pick_ty(), d - 1, cx))
        c = self.call(t, d, cx)
        return c if c is not None else self.leaf(t, cx)

    def call(self, t, d, cx):
        fs = [f for f in cx.funcs if f.cost * cx.mult <= cx.callbudget]
        if not fs:
            return None
        f = self.R.choice(fs)
        c = Call(f.idx, f.rty, [self.expr(p.ty, d - 1, cx) for p in f.params])
        return c if f.rty == t else Cast(t, c)

    def cond(self, d, cx):
        R = self.R
        r = R.random()
        if d > 0 and r < 0.2:
            return Logic(R.choice(['&&', '||']), self.cond(d - 1, cx), self.cond(d - 1, cx))
        if d > 0 and r < 0.25:
            return Not(self.cond(d - 1, cx))
        if r < 0.4:
            # thread-divergent
            names = ['ltid', 'lane', 'gtid', 'threadIdx.x', 'threadIdx.y'] if cx.kernel else ['threadIdx.x', 'threadIdx.y']
            x = R.choice(names + [v.r() for v in cx.ro])
            return Cmp(R.choice(['==', '!=', '<', '>']), Raw(f'({x} & {R.choice([1, 3, 7, 15, 31])}u)'),
                       Const('u32', R.randint(0, 7)))
        t = self.pick_ty()
        return Cmp(R.choice(['<', '<=', '>', '>=', '==', '!=']), self.expr(t, d - 1, cx), self.expr(t, d - 1, cx))

    # ---- statements
    def stmts(self, cx, n):
        out = []
        for _ in range(n):
            s = self.stmt(cx)
            if s is not None:
                out.append(s)
        return out

    def body_len(self, cx):
        return self.R.randint(1, 3 if cx.depth < 1 else 2)

    def stmt(self, cx):
        R = self.R
        cands = [('assign', 30)]
        if cx.kernel:
            cands += [('store', 8), ('arrst', 4), ('atom', 4)]
            if cx.shatom:
                cands.append(('shatom', 6))
                if FEATURES & {'spin', 'lock'}:
                    cands.append(('locked', 3))
        if cx.depth < 3:
            cands += [('if', 14), ('switch', 4), ('block', 3)]
            if cx.mult * 8 <= cx.maxmult:
                cands += [('for', 6), ('while', 7)]
            if FEATURES & {'spin', 'poll'} and any(isint(v.ty) for v in cx.vars):
                cands.append(('poll', 5))
            if cx.kernel and cx.mult == 1:
                cands.append(('grid', 4))
        if cx.brk:
            cands.append(('break', 5))
        if cx.loop:
            cands.append(('continue', 4))
        if cx.ret is not None:
            cands.append(('return', 3))
        if cx.labels:
            cands.append(('goto', 4))
        kind = R.choices([c[0] for c in cands], [c[1] for c in cands])[0]
        d = R.randint(1, 2)
        if kind == 'assign':
            if not cx.vars:
                return None
            v = R.choice(cx.vars)
            e = self.expr(v.ty, d, cx)
            if R.random() < 0.3:
                e = Bin(R.choice(['+', '^', '*', '-']) if isint(v.ty) else R.choice('+*-'), v, e)
            return Assign(v, e)
        if kind == 'store':
            t = self.pick_ty()
            return Store(R.randrange(self.W), self.expr(t, d, cx))
        if kind == 'arrst':
            return ArrSt(self.expr('u32', 1, cx), self.expr('u32', d, cx))
        if kind == 'locked':
            return Locked(R.randrange(8), self.expr(R.choice(['u32', 'i32']), d, cx))
        if kind in ('atom', 'shatom'):
            k = R.randrange(8)
            return Atom(kind == 'shatom', k, self.expr(R.choice(['u32', 'i32']), d, cx))
        sub = cx.sub(depth=cx.depth + 1)
        if kind == 'if':
            c = self.cond(2, cx)
            then = self.stmts(sub, self.body_len(cx))
            els = self.stmts(sub, self.body_len(cx)) if R.random() < 0.4 else []
            return If(c, then, els)
        if kind == 'switch':
            mask = R.choice([1, 3, 7])
            vals = list(range(mask + 1))
            R.shuffle(vals)
            cases = []
            scx = sub.sub(brk=True)
            while vals and len(cases) < 4:
                k = R.randint(1, 2)
                cv, vals = vals[:k], vals[k:]
                cases.append(Case(cv, self.stmts(scx, R.randint(0, 2)), R.random() < 0.6))
            if R.random() < 0.6:
                cases.append(Case([None], self.stmts(scx, R.randint(1, 2)), R.random() < 0.5))
            return Switch(self.expr(R.choice(['u32', 'i32', 'u8', 'i64']), 2, cx), mask, cases)
        if kind == 'block':
            lab = self.fresh('L')
            return Block(lab, self.stmts(sub.sub(labels=cx.labels + [lab]), R.randint(2, 5)))
        if kind == 'for':
            iv = self.fresh('i')
            mask = R.choice([1, 3, 7])
            lo = R.randint(0, 2)
            lcx = sub.sub(loop=True, brk=True, mult=cx.mult * (mask + lo), ro=cx.ro + [Raw(iv)])
            bound = self.expr('u32', 2, cx) if R.random() < 0.7 else Const('u32', R.randint(0, 7))
            return For(iv, bound, mask, lo, self.stmts(lcx, self.body_len(cx) + 1))
        if kind == 'while':
            g = self.fresh('g')
            n = R.randint(1, 8)
            lcx = sub.sub(loop=True, brk=True, mult=cx.mult * n)
            body = self.stmts(lcx, self.body_len(cx) + 1)
            if R.random() < 0.6:   # early exit
                body.insert(R.randint(0, len(body)), If(self.cond(2, cx), [Simple('break;')], []))
            return While(g, n, self.cond(2, cx), body, R.random() < 0.35)
        if kind == 'poll':
            g = self.fresh('g')
            var = R.choice([v for v in cx.vars if isint(v.ty)])
            empty = R.random() < 0.5
            n = R.choice([1, 3, 17, 40, 100]) if empty else R.randint(1, max(1, min(8, cx.maxmult // (cx.mult * 2))))
            body = [] if empty else self.stmts(sub.sub(loop=True, brk=True, mult=cx.mult * n), self.body_len(cx))
            return Poll(g, n, self.expr('u32', 2, cx), R.choice([0, 1, 3]), R.choice([1, 3, 7]), R.randint(0, 3), var, body)
        if kind == 'grid':
            iv = self.fresh('i')
            k = R.randint(1, 3)
            lcx = sub.sub(loop=True, brk=True, mult=cx.mult * (k + 1), ro=cx.ro + [Raw(iv)])
            body = self.stmts(lcx, R.randint(0, 2))
            # the shape that hid a miscompile: an early-exit while loop inside
            g = self.fresh('g')
            n = R.randint(2, 8)
            wcx = lcx.sub(mult=lcx.mult * n, depth=lcx.depth + 1)
            wb = self.stmts(wcx, R.randint(1, 3))
            wb.insert(R.randint(0, len(wb)), If(self.cond(2, wcx), [Simple('break;')], []))
            body.insert(R.randint(0, len(body)), While(g, n, self.cond(2, wcx), wb, R.random() < 0.3))
            return GridStride(iv, k, R.randint(0, min(40, self.ntot)), body)
        if kind in ('break', 'continue'):
            s = Simple(kind + ';')
            return If(self.cond(2, cx), [s], []) if R.random() < 0.8 else s
        if kind == 'return':
            s = Simple('return;') if cx.ret == 'kernel' else Return(self.expr(cx.ret, 2, cx))
            return If(self.cond(2, cx), [s], []) if R.random() < 0.85 else s
        if kind == 'goto':
            s = Simple(f'goto {R.choice(cx.labels)};')
            return If(self.cond(2, cx), [s], []) if R.random() < 0.85 else s
        raise ValueError(kind)

    # ---- uniform statements
    def ustmt(self, cx):
        R = self.R
        cands = [('div', 40)]
        if cx.uni == 'block':
            cands += [('xchg', 10), ('synccount', 4), ('sync', 2)]
        if self.warp_ok:
            cands += [('warp', 22), ('syncwarp', 1)]
            if FEATURES & {'warpsync', 'warpsync_plain'}:
                cands.append(('lockstep', 14))
        if cx.depth < 2:
            cands += [('uif', 8)]
            if cx.mult * 4 <= cx.maxmult:
                cands += [('ufor', 6)]
                if self.warp_ok:
                    cands += [('uwhile', 5)]
        kind = R.choices([c[0] for c in cands], [c[1] for c in cands])[0]
        if kind == 'div':
            return self.stmt(cx.sub(uni=None, loop=False, brk=False, labels=[]))
        if kind == 'sync':
            return Simple('__syncthreads();')
        if kind == 'syncwarp':
            return Simple('__syncwarp();')
        v = R.choice(cx.vars)
        dcx = cx.sub(uni=None)
        if kind == 'xchg':
            src = self.expr('u32', 2, dcx)
            idx = Raw('ltid') if R.random() < 0.2 else self.expr('u32', 2, dcx)
            rd = ShRd(idx)
            return ShXchg(src, v, rd if v.ty == 'u32' else Cast(v.ty, rd))
        if kind == 'lockstep':
            # The plain form only with 'warpsync_plain': under nvcc -G its
            # accesses are generic, which ptxvk's lock step does not cover.
            form = R.choice(['publish', 'overwrite'] + (['plain'] if 'warpsync_plain' in FEATURES else []))
            if R.random() < 0.3:
                idx = Const('u32', R.randint(0, 31))
            elif R.random() < 0.5:
                idx = Raw(f'(lane {R.choice(["+", "^", "-"])} {R.randint(1, 31)}u)')
            else:
                idx = self.expr('u32', 2, dcx)
            if form == 'plain' and isinstance(idx, (Const, Raw)):
                # Not an index nvcc can prove differs from the lane: it must
                # keep the load before the store.
                idx = Bin('+', idx, Raw(f'in[(gtid * 7u + {R.randrange(IN_WORDS)}u) & {IN_WORDS - 1}u]'))
            return WarpLockstep(form, v, self.expr('u32', 2, dcx), idx, self.fresh('r'))
        if kind == 'synccount':
            fn = R.choice(['__syncthreads_count', '__syncthreads_and', '__syncthreads_or'])
            w = Warp(fn, 'i32', self.cond(2, dcx))
            return Assign(v, w if v.ty == 'i32' else Cast(v.ty, w))
        if kind == 'warp':
            fn = R.choice(['__shfl_sync', '__shfl_up_sync', '__shfl_down_sync', '__shfl_xor_sync',
                           '__ballot_sync', '__any_sync', '__all_sync', '__reduce_add_sync', '__reduce_min_sync',
                           '__reduce_max_sync', '__reduce_and_sync', '__reduce_or_sync', '__reduce_xor_sync'])
            if fn.startswith('__shfl'):
                t = v.ty if v.ty in ('u32', 'i32', 'f32', 'u64', 'i64', 'f64') and R.random() < 0.7 else \
                    R.choice(['u32', 'i32', 'f32', 'u64', 'i64', 'f64'])
                wd = R.choice([32, 32, 32, 16, 8, 4, 2])
                if fn == '__shfl_xor_sync':
                    b = Const('i32', R.randint(1, wd - 1)) if wd > 1 else Const('i32', 0)
                elif fn == '__shfl_sync':
                    b = Const('i32', R.randint(0, 40)) if R.random() < 0.5 else \
                        Cast('i32', Bin('&', self.expr('u32', 2, dcx), Const('u32', 31)))
                else:
                    b = Const('u32', R.randint(0, 31)) if R.random() < 0.6 else \
                        Bin('&', self.expr('u32', 2, dcx), Const('u32', 31))
                w = Warp(fn, t, self.expr(t, 2, dcx), b, wd)
            elif fn in ('__ballot_sync', '__any_sync', '__all_sync'):
                w = Warp(fn, 'u32' if fn == '__ballot_sync' else 'i32', self.cond(2, dcx))
            else:
                t = 'u32' if fn in ('__reduce_and_sync', '__reduce_or_sync', '__reduce_xor_sync') else R.choice(['u32', 'i32'])
                w = Warp(fn, t, self.expr(t, 2, dcx))
            return Assign(v, w if v.ty == w.ty else Cast(v.ty, w))
        sub = cx.sub(depth=cx.depth + 1)
        if kind == 'ufor':
            iv = self.fresh('u')
            c = R.randint(1, 4)
            lcx = sub.sub(mult=cx.mult * c, ro=cx.ro + [Raw(iv)], uvals=cx.uvals + [iv])
            return UFor(iv, c, self.ustmts(lcx, R.randint(1, 4)))
        if kind == 'uif':
            c, level = self.ucond(cx)
            lcx = sub.sub(uni=level)
            return If(c, self.ustmts(lcx, R.randint(1, 3)),
                      self.ustmts(lcx, R.randint(1, 2)) if R.random() < 0.4 else [])
        if kind == 'uwhile':
            g = self.fresh('g')
            n = R.randint(1, 6)
            lcx = sub.sub(uni='warp', mult=cx.mult * n)
            p = self.cond(2, dcx)
            c = UCond(R.choice(['__any_sync(DT_FULL, {p})', '!__all_sync(DT_FULL, {p})']), p)
            return While(g, n, c, self.ustmts(lcx, R.randint(1, 3)), R.random() < 0.3)
        raise ValueError(kind)

    def ustmts(self, cx, n):
        out = []
        for _ in range(n):
            s = self.ustmt(cx)
            if s is not None:
                out.append(s)
        return out

    def ucond(self, cx):
        """A condition uniform over the block (or over each warp)."""
        R = self.R
        dcx = cx.sub(uni=None)
        opts = ['bid1', 'bid2']
        if cx.uvals:
            opts += ['u1', 'u2']
        if cx.uni == 'block':
            opts += ['sor', 'scount']
        if self.warp_ok:
            opts += ['wid', 'any', 'all', 'ballot']
        k = R.choice(opts)
        if k == 'bid1':
            return UCond(f'(bid & 1u) == {R.randint(0, 1)}u'), cx.uni
        if k == 'bid2':
            return UCond(f'bid < {R.randint(1, 3)}u'), cx.uni
        if k in ('u1', 'u2'):
            u = R.choice(cx.uvals)
            return UCond(f'({u} & 1u) == 0u' if k == 'u1' else f'{u} < 2u'), cx.uni
        p = self.cond(2, dcx)
        if k == 'sor':
            return UCond('__syncthreads_or({p})', p), cx.uni
        if k == 'scount':
            return UCond('__syncthreads_count({p}) > ' + str(R.randint(0, 64)), p), cx.uni
        if k == 'wid':
            return UCond(f'(wid & 1u) == {R.randint(0, 1)}u'), 'warp'
        if k == 'any':
            return UCond('__any_sync(DT_FULL, {p})', p), 'warp'
        if k == 'all':
            return UCond('__all_sync(DT_FULL, {p})', p), 'warp'
        return UCond(f'(__ballot_sync(DT_FULL, {{p}}) & {R.getrandbits(32):#x}u) != 0u', p), 'warp'

    # ---- program
    def func(self, idx, funcs):
        R = self.R
        rty = self.pick_ty()
        params = [Var(f'a{k}', self.pick_ty()) for k in range(R.randint(1, 3))]
        cx = Ctx(kernel=False, funcs=funcs, ret=rty, maxmult=24, ro=[], callbudget=60)
        cx.vars = list(params)
        locs = []
        for k in range(R.randint(0, 2)):
            v = Var(f'w{k}', self.pick_ty())
            locs.append((v, self.expr(v.ty, 2, cx)))
            cx.vars.append(v)
        self.maxmult_seen = 1
        body = self.stmts(cx, R.randint(1, 3))
        f = Func(idx, rty, params, locs, body, self.expr(rty, 2, cx))
        f.cost = 24 * (1 + len(funcs))
        return f

    def program(self):
        R = self.R
        p = Program()
        p.seed = self.seed
        shapes = [(32, 1, 1), (64, 1, 1), (96, 1, 1), (128, 1, 1), (32, 1, 1), (64, 1, 1), (256, 1, 1),
                  (40, 1, 1), (100, 1, 1), (8, 4, 1), (16, 2, 2), (32, 2, 1), (7, 3, 1), (1, 1, 1), (33, 1, 1)]
        p.block = R.choice(shapes)
        p.grid = R.choice([(1, 1, 1), (2, 1, 1), (3, 1, 1), (4, 1, 1), (2, 2, 1), (1, 2, 1), (2, 1, 2)])
        if p.nthr >= 128 and p.grid[0] * p.grid[1] * p.grid[2] > 2:
            p.grid = (2, 1, 1)
        self.warp_ok = p.nthr % 32 == 0
        self.ntot = p.ntot
        p.W = R.randint(2, 6)
        self.W = p.W
        for k in range(R.choice([0, 0, 1, 1, 2])):
            p.funcs.append(self.func(k, list(p.funcs)))
        ro = [Raw(x) for x in ('ltid', 'gtid', 'lane', 'wid', 'bid', 'nthr', 'threadIdx.x', 'threadIdx.y', 'blockIdx.x')]
        cx = Ctx(kernel=True, funcs=p.funcs, ro=ro)
        for k in range(R.randint(3, 7)):
            v = Var(f'v{k}', self.pick_ty())
            p.vars.append((v, self.init(v.ty, cx)))
            cx.vars.append(v)
        vs = Var('vs', 'u32')
        p.vars.append((vs, Const('u32', 0)))
        p.vs = vs
        p.sc_read = R.randrange(8)
        ucx = cx.sub(uni='block', shatom=True)
        p.ubody = self.ustmts(ucx, R.randint(2, 5))
        cx.vars.append(vs)
        p.fbody = self.stmts(cx.sub(ret='kernel'), R.randint(1, 4))
        allv = [v for v, _ in p.vars]
        p.finals = [allv[j % len(allv)] for j in range(p.W)]
        return p

    def init(self, t, cx):
        R = self.R
        a, b = R.randrange(IN_WORDS), R.randint(1, 5)
        ld = f'in[(gtid * {b}u + {a}u) & {IN_WORDS - 1}u]'
        r = R.random()
        if isint(t):
            if r < 0.5:
                return Cast(t, Raw(ld))
            if r < 0.75:
                return Cast(t, Raw(f'({ld} & {R.choice([3, 15, 255])}u)'))
            return Cast(t, Raw(f'(ltid + {R.randint(0, 9)}u)'))
        if t == 'f32':
            if r < 0.4:
                return Raw(f'dt_u2f({ld})', 'f32')
            return Raw(f'((float)({ld} & 255u) * 0x1p-2f - 8.0f)', 'f32')
        if r < 0.4:
            return Raw(f'dt_u2d({ld}, in[(gtid + {R.randrange(IN_WORDS)}u) & {IN_WORDS - 1}u])', 'f64')
        return Raw(f'((double)({ld} & 65535u) * 0x1p-3 - 100.0)', 'f64')


def gen_inputs(seed):
    """The `in` words of a case: random, with special values mixed in."""
    R = random.Random(seed * 7919 + 17)
    specials = [0, 1, 2, 0xffffffff, 0x80000000, 0x7fffffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x3f800000,
                0xbf800000, 0x00000001, 0x80000001, 0x00800000, 0x4f000000, 0xcf000000, 0x3, 0x10, 0xff, 0xffff]
    out = []
    for _ in range(IN_WORDS):
        r = R.random()
        if r < 0.2:
            out.append(R.choice(specials))
        elif r < 0.45:
            out.append(R.randint(0, 40))
        elif r < 0.6:
            out.append(struct.unpack('<I', struct.pack('<f', R.randint(-400, 400) / 4))[0])
        else:
            out.append(R.getrandbits(32))
    out[0] |= 1  # never all zeros
    return out


def uses_warp(p):
    """Does the program use warp intrinsics (needs nthr % 32 == 0)?"""
    found = []

    def visit(n):
        if isinstance(n, Warp) and not n.fn.startswith('__syncthreads'):
            found.append(1)
        if isinstance(n, UCond) and ('sync(' in n.tmpl and 'syncthreads' not in n.tmpl):
            found.append(1)
        if isinstance(n, Simple) and n.text == '__syncwarp();':
            found.append(1)
        for ch in children(n):
            visit(ch)
    visit(p)
    return bool(found)


def children(n):
    for name, kind in n._f:
        v = getattr(n, name)
        if v is None:
            continue
        if kind == 'e':
            yield v
        else:
            yield from v


def generate(seed):
    g = Gen(seed)
    p = g.program()
    p.in_words = gen_inputs(seed)
    return p
