#!/usr/bin/env python3
"""Checks the shape of the workspace's crates the way issue 31 asks for it: files over 800
lines, functions over 120 lines, `x-ms-*` / `x-strata-*` header names spelled out instead of
taken from `strata_query::protocol::header`, and cycles between a crate's modules — file by file and
between its top-level folders (from `use crate::…`, `super::…` and `self::…` paths, followed
through `pub use` re-exports to the module that defines the item, so that a child reaching a
sibling through its parent's re-export counts; tests excluded). Prints what it finds; exits 1
if anything is over.

    python3 tools/layout_check.py [--crate server/src --crate query/src ...] [--max-file 800] [--max-fn 120]
"""
import argparse, os, re, sys

def modules(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith('.rs'):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root)[:-3].replace(os.sep, '::')
            if rel.endswith('::mod'):
                rel = rel[:-5]
            if rel in ('lib', 'main'):
                rel = 'crate'
            out[rel] = path
    return out

def is_test(name, path):
    base = os.path.basename(path)
    return base in ('tests.rs',) or base.endswith('_tests.rs')

def strip_tests(text):
    # Drop `#[cfg(test)] mod x { ... }` blocks (inline test modules).
    out, i = [], 0
    for m in re.finditer(r'#\[cfg\(test\)\]\s*mod\s+\w+\s*\{', text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {'{': 1, '}': -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return ''.join(out)

def resolve(cur, path, mods, reexports=None, depth=0):
    """The module `path` (as written in module `cur`) lands in: the longest module prefix,
    followed through `pub use` re-exports to the module that defines the item, so that
    `super::Span` names the sibling that defines `Span`, not the parent that re-exports it."""
    parts = path.split('::')
    if parts[0] == 'crate':
        base = []
        parts = parts[1:]
    elif parts[0] in ('super', 'self'):
        base = cur.split('::') if cur != 'crate' else []
        while parts and parts[0] in ('super', 'self'):
            if parts[0] == 'super':
                base = base[:-1]
            parts = parts[1:]
    else:
        return None
    for n in range(len(parts), -1, -1):
        cand = '::'.join(base + parts[:n]) or 'crate'
        if cand in mods:
            rest = parts[n:]
            target = (reexports or {}).get(cand, {}).get(rest[0]) if rest else None
            if target and depth < 8:
                again = resolve(cand, target + ('::' + '::'.join(rest[1:]) if rest[1:] else ''),
                                mods, reexports, depth + 1)
                return again or cand
            return cand
    return None

def reexports_of(mods):
    """Each module's `pub use` items: name (or alias) -> the path it re-exports, written as
    from that module (`self::`-prefixed when relative). Globs are left out."""
    out = {}
    stmt = re.compile(r'\bpub(?:\([^)]*\))?\s+use\s+([^;]+);')
    for m, path in mods.items():
        text = re.sub(r'//[^\n]*', '', strip_tests(open(path).read()))
        names = {}
        for body in stmt.findall(text):
            body = re.sub(r'\s+', '', re.sub(r'\s+as\s+', ' as ', body).replace(' as ', '@'))
            for item in expand(body):
                target, _, alias = item.partition('@')
                last = target.split('::')[-1]
                if last in ('*', 'self'):
                    continue
                if target.split('::')[0] not in ('crate', 'super', 'self'):
                    target = 'self::' + target
                names[alias or last] = target
        if names:
            out[m] = names
    return out

def expand(body):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (an alias stays as `@alias`)."""
    i = body.find('{')
    if i < 0:
        return [body]
    prefix, inner = body[:i], body[i + 1:body.rfind('}')]
    parts, depth, cur = [], 0, ''
    for ch in inner:
        if ch == ',' and depth == 0:
            parts.append(cur); cur = ''
            continue
        depth += {'{': 1, '}': -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return [x for part in parts if part for x in expand(prefix + part)]

def edges(mods):
    g = {m: set() for m in mods}
    reexports = reexports_of(mods)
    ref = re.compile(r'\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)')
    group = re.compile(r'\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^}]*)\}')
    for m, path in mods.items():
        if is_test(m, path):
            continue
        text = strip_tests(open(path).read())
        text = re.sub(r'//[^\n]*', '', text)
        found = set(ref.findall(text))
        for prefix, inner in group.findall(text):
            for item in inner.split(','):
                item = item.strip().split(' as ')[0].split('::{')[0]
                if item and item != 'self':
                    found.add(prefix + '::' + item)
                elif item == 'self':
                    found.add(prefix)
        for p in found:
            t = resolve(m, p, mods, reexports)
            if t and t != m and not m.startswith(t + '::') and not t.startswith(m + '::'):
                if not is_test(t, mods[t]):
                    g[m].add(t)
    return g

def sccs(g):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1
        stack.append(v); on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in g:
        if v not in index:
            visit(v)
    return out

def long_fns(path, limit):
    lines = open(path).read().split('\n')
    out = []
    fn = re.compile(r'^(\s*)(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)')
    in_test = False
    for i, l in enumerate(lines):
        if re.match(r'\s*#\[cfg\(test\)\]', l):
            in_test = True
        m = fn.match(l)
        if not m or in_test:
            continue
        indent = m.group(1)
        for j in range(i + 1, len(lines)):
            if lines[j].startswith(indent + '}') and len(lines[j].rstrip()) == len(indent) + 1:
                if j - i + 1 > limit:
                    out.append((m.group(7), i + 1, j - i + 1))
                break
    return out

HEADER_LITERAL = re.compile(r'"(x-ms-[a-z0-9-]+|x-strata-[a-z0-9-]+)"')

def header_literals(path):
    """Header names spelled out in code instead of taken from `strata_query::protocol::header`
    (comments and test modules aside)."""
    text = strip_tests(open(path).read())
    out = []
    for i, l in enumerate(text.split('\n')):
        if l.lstrip().startswith('//'):
            continue
        for m in HEADER_LITERAL.finditer(l):
            out.append((i + 1, m.group(1)))
    return out

def main():
    a = argparse.ArgumentParser()
    a.add_argument('--crate', action='append')
    a.add_argument('--max-file', type=int, default=800)
    a.add_argument('--max-fn', type=int, default=120)
    args = a.parse_args()
    bad, total = 0, 0
    for root in args.crate or ['server/src', 'query/src', 'sdk/src']:
        mods = modules(root)
        total += len(mods)
        for m, path in sorted(mods.items()):
            if is_test(m, path):
                continue
            n = len(open(path).read().split('\n'))
            if n > args.max_file:
                print(f'file over {args.max_file} lines: {path} ({n})'); bad += 1
            for name, line, length in long_fns(path, args.max_fn):
                print(f'function over {args.max_fn} lines: {path}:{line} {name} ({length})'); bad += 1
            if not path.endswith('query/src/protocol.rs'):
                for line, name in header_literals(path):
                    print(f'header name spelled out (use protocol::header): {path}:{line} {name}'); bad += 1
        g = edges(mods)
        for comp in sccs(g):
            print(f'module cycle in {root}: ' + ' <-> '.join(comp)); bad += 1
        top = {}
        for m, targets in g.items():
            a_ = m.split('::')[0]
            top.setdefault(a_, set())
            for t in targets:
                b_ = t.split('::')[0]
                if a_ != b_:
                    top[a_].add(b_)
                    top.setdefault(b_, set())
        for comp in sccs(top):
            print(f'folder cycle in {root}: ' + ' <-> '.join(comp)); bad += 1
    print(f'{total} modules checked, {bad} finding(s)')
    sys.exit(1 if bad else 0)

main()
