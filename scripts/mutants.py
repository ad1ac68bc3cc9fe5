#!/usr/bin/env python3
"""Mechanical mutants of the protocol code, for scripts/mutants.sh.

    mutants.py list FILE...          one line per mutant:
                                     ID<TAB>file:line<TAB>description
    mutants.py apply ID SRC DEST     write the mutated file of ID (read from
                                     the tree at SRC) into the tree at DEST
    mutants.py report TSV SRC HOW    the markdown report of a run's results
                                     (mutants.sh's results.tsv; SRC: the
                                     tree the mutants were made from; HOW:
                                     how it was run, for the heading)

A mutant ID is `file:function:kind#n`: the function is the innermost `fn`
around the mutated code, qualified by the type of its `impl` (or trait)
block and by any `fn` around it (`LockFree::advance_horizon`; `-` outside
every function), and `n` counts the mutants of that kind in that function
in file order, from 1. Editing another function, or lines around the site,
leaves the ID as it is; the `file:line` column says where the site is in
the tree listed. Two functions of a file with the same qualified name (an
inherent method and a trait method of one type) get `@2`, `@3` in file
order. Kinds:

* fence-removed      a `fence(Ordering::SeqCst)` deleted, or a call of
                     handshake 1's pair (`fences.light()`, `fences.heavy()`,
                     `sync::Fences`; loom runs both as SeqCst fences)
* fence-weakened     a `fence(Ordering::SeqCst)` or a pair call made
                     `fence(Ordering::AcqRel)`
* fence-swapped      a pair call swapped for the other side's
                     (`fences.light()` <-> `fences.heavy()`); loom runs both
                     as one SeqCst fence, so only the unit tests that count
                     a call site's fences (`lockfree/pin_horizon.rs`) can
                     kill these
* order-X-Y          one ordering stronger than Relaxed weakened one step,
                     to an ordering legal for the operation (load: SeqCst ->
                     Acquire -> Relaxed; store: SeqCst -> Release ->
                     Relaxed; read-modify-write: SeqCst -> AcqRel ->
                     Release | Acquire, Acquire/Release -> Relaxed; a CAS's
                     failure ordering like a load)
* cmp-A-B            a comparison `<`/`<=`/`>`/`>=` flipped (`<` <-> `<=`,
                     `>` <-> `>=`); rustfmt puts spaces around binary
                     operators, which tells them from generics. In a
                     function that handles a tag-carrying word (it names a
                     tag mask: an identifier ending in `TAG`, or `tag`),
                     also `!=` -> `>` ("changed" taken for "grew", which a
                     wrapped tag breaks) and `>` -> `!=`
* mask-dropped       a tag mask `& !..TAG` (or `& !tag`) removed, so a
                     tag-carrying word is compared or reported with its tag
                     bits on
* store-after-fence  a one-line store just before a SeqCst fence moved after
                     it (store-fence-load handshakes)
* load-before-fence  a one-line load just after a SeqCst fence moved before it

Comments and `#[cfg(... test ...)]` modules at the end of a file are not
mutated, nor the `std::sync::atomic` orderings of the mutant switch itself.
"""

import re
import sys

ORDER_RE = re.compile(r"Ordering::(SeqCst|AcqRel|Acquire|Release)\b")
FENCE_RE = re.compile(r"\bfence\(Ordering::SeqCst\)|\bself\.fences\.(?:light|heavy)\(\)")
CMP_RE = re.compile(r"(?<=[\w)\]]) (<=|>=|<|>|!=) (?=[\w(&*!-])")
TAG_RE = re.compile(r"\b\w*TAG\b|\btag\b")
MASK_RE = re.compile(r" & !(\w*TAG|tag)\b")
PAIR_RE = re.compile(r"\bself\.fences\.(light|heavy)\(\)")
RMW = {"swap", "fetch_add", "fetch_sub", "fetch_max", "fetch_min", "fetch_or",
       "fetch_and", "fetch_xor", "fetch_update", "compare_exchange",
       "compare_exchange_weak"}


def strip_comments(text):
    """`text` with `//` comments blanked (same length, same offsets).
    Strings containing `//` do not occur in the mutated files' code."""
    out = []
    for line in text.split("\n"):
        i = line.find("//")
        out.append(line if i < 0 else line[:i] + " " * (len(line) - i))
    return "\n".join(out)


def code_end(code):
    """Offset where the trailing inline test module starts (not mutated).
    A `mod tests;` declaration (tests in a file of their own) may stand
    anywhere; the code after it is mutated."""
    m = re.search(r"^#\[cfg\([^\n]*\btest\b[^\n]*\)\]\s*\nmod tests\s*\{", code, re.M)
    return m.start() if m else len(code)


def enclosing_call(code, pos):
    """(name, argument index) of the innermost call whose parentheses
    contain `pos`."""
    depth = 0
    commas = 0
    i = pos - 1
    while i >= 0:
        c = code[i]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth == 0:
                if c != "(":
                    return None, 0
                e = i - 1 if i > 0 and code[i - 1] == "!" else i  # macros
                j = e
                while j > 0 and (code[j - 1].isalnum() or code[j - 1] == "_"):
                    j -= 1
                return code[j:e], commas
            depth -= 1
        elif c == "," and depth == 0:
            commas += 1
        i -= 1
    return None, 0


def fn_spans(code):
    """(start, end) of every `fn` body in `code` (braces matched)."""
    spans = []
    for m in re.finditer(r"\bfn\s+\w+", code):
        i = code.find("{", m.end())
        semi = code.find(";", m.end())
        if i < 0 or (0 <= semi < i):
            continue  # a declaration without a body (trait method)
        depth = 0
        for j in range(i, len(code)):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    spans.append((m.start(), j + 1))
                    break
    return spans


def matching_brace(code, i):
    """Offset just past the `}` that closes the `{` at `i`."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def strip_generics(text):
    """`text` without its `<...>` groups (nested ones included)."""
    out, depth = [], 0
    for c in text:
        if c == "<":
            depth += 1
        elif c == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


IMPL_RE = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(impl|trait)\b", re.M)


def scopes(code):
    """(start, end, name, is_fn) of every `impl`/`trait` block (the type's
    or trait's name) and every `fn` body (the function's name)."""
    out = []
    for m in IMPL_RE.finditer(code):
        i = code.find("{", m.end())
        semi = code.find(";", m.end())
        if i < 0 or (0 <= semi < i):
            continue
        head = strip_generics(code[m.end():i]).split(" where ")[0]
        if m.group(1) == "impl" and " for " in f" {head} ":
            head = f" {head} ".split(" for ")[-1]
        names = re.findall(r"\w+", head.replace("dyn ", " ").replace("unsafe ", " "))
        names = [n for n in names if n not in ("pub", "crate", "super", "self")]
        if names:
            out.append((m.start(), matching_brace(code, i), names[-1], False))
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        i = code.find("{", m.end())
        semi = code.find(";", m.end())
        if i < 0 or (0 <= semi < i):
            continue  # a declaration without a body (trait method)
        out.append((m.start(), matching_brace(code, i), m.group(1), True))
    return out


def fn_names(code):
    """A function `pos -> qualified name of the innermost fn around pos`,
    with same-named functions of one file told apart by `@2`, `@3`."""
    sc = scopes(code)
    fns = sorted((a, b) for a, b, _, is_fn in sc if is_fn)
    names = {}
    seen = {}
    for a, b in fns:
        chain = sorted((s for s in sc if s[0] <= a and b <= s[1]), key=lambda s: s[0])
        qual = "::".join(s[2] for s in chain)
        seen[qual] = seen.get(qual, 0) + 1
        names[(a, b)] = qual if seen[qual] == 1 else f"{qual}@{seen[qual]}"

    def name_at(pos):
        inner = [(a, b) for a, b in fns if a <= pos < b]
        return names[max(inner)] if inner else "-"
    return name_at


def in_tag_fn(code, spans, pos):
    """Is `pos` inside a function that names a tag mask?"""
    inner = [(a, b) for a, b in spans if a <= pos < b]
    if not inner:
        return False
    a, b = max(inner)  # the innermost: the latest start
    return bool(TAG_RE.search(code, a, b))


def op_kind(code, pos):
    name, arg = enclosing_call(code, pos)
    if name == "ordering_or_mutant":
        # The helper's result is the ordering of the call around it.
        start = code.rfind("ordering_or_mutant(", 0, pos)
        name, arg = enclosing_call(code, start)
    if name == "load":
        return "load"
    if name == "store":
        return "store"
    if name in ("compare_exchange", "compare_exchange_weak"):
        return "rmw" if arg == 2 else "load"  # failure ordering: like a load
    if name in RMW:
        return "rmw"
    return None


WEAKER = {
    "load": {"SeqCst": ["Acquire"], "Acquire": ["Relaxed"]},
    "store": {"SeqCst": ["Release"], "Release": ["Relaxed"]},
    "rmw": {"SeqCst": ["AcqRel"], "AcqRel": ["Release", "Acquire"],
            "Acquire": ["Relaxed"], "Release": ["Relaxed"]},
}


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def is_blank_or_comment(line):
    s = line.strip()
    return s == "" or s.startswith("//")


def fence_unit(lines, i):
    """(first, last) line indices of the fence at line `i`, widened to an
    `if !mutant_on(..) { fence }` block around it."""
    j = i - 1
    while j >= 0 and is_blank_or_comment(lines[j]):
        j -= 1
    k = i + 1
    while k < len(lines) and is_blank_or_comment(lines[k]):
        k += 1
    if (j >= 0 and k < len(lines) and lines[j].strip().startswith("if ")
            and lines[j].rstrip().endswith("{") and lines[k].strip() == "}"):
        return j, k
    return i, i


SWITCHED = re.compile(r"^\s*(\} else )?(let \w+ = )?if (mutant_on\(|early\b|late\b)")


def in_switched_branch(code, pos):
    """Is `pos` inside the broken branch of a mutant switch (`if
    mutant_on(..) {`, `if early {`), or in an assertion? Mutating those
    tests nothing."""
    ls = code.rfind("\n", 0, pos) + 1
    le = code.find("\n", pos)
    prev = code.rfind("\n", 0, max(ls - 1, 0)) + 1
    if "assert" in code[ls:le] or "cfg(debug_assertions)" in code[prev:ls]:
        return True
    name, _ = enclosing_call(code, pos)
    if name and "assert" in name:
        return True
    depth = 0
    i = pos - 1
    while i >= 0:
        c = code[i]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth == 0:
                ls = code.rfind("\n", 0, i) + 1
                return bool(SWITCHED.match(code[ls:i]))
            depth -= 1
        i -= 1
    return False


def mutants(path, text):
    """Yields (id, file:line, description, mutated text)."""
    code = strip_comments(text)
    end = code_end(code)
    seen = {}
    name_at = fn_names(code[:end])

    def mid(pos, kind):
        """The ID and `file:line` of the mutant of `kind` at offset `pos`."""
        line = line_of(text, pos)
        key = f"{path}:{name_at(pos)}:{kind}"
        seen[key] = seen.get(key, 0) + 1
        return f"{key}#{seen[key]}", f"{path}:{line}"

    spans = fn_spans(code)
    for m in FENCE_RE.finditer(code, 0, end):
        if in_switched_branch(code, m.start()):
            continue
        ln = line_of(text, m.start())
        yield (*mid(m.start(), "fence-removed"), f"{m.group(0)} removed",
               text[:m.start()] + "/* mutant: fence removed */ ()" + text[m.end():])
        yield (*mid(m.start(), "fence-weakened"), f"{m.group(0)} -> fence(AcqRel)",
               text[:m.start()] + "fence(Ordering::AcqRel)" + text[m.end():])
        p = PAIR_RE.match(code, m.start())
        if p:
            other = {"light": "heavy", "heavy": "light"}[p.group(1)]
            yield (*mid(m.start(), f"fence-swapped-{p.group(1)}-{other}"),
                   f"{m.group(0)} -> self.fences.{other}()",
                   text[:m.start()] + f"self.fences.{other}()" + text[m.end():])
    for m in MASK_RE.finditer(code, 0, end):
        if in_switched_branch(code, m.start()):
            continue
        ln = line_of(text, m.start())
        yield (*mid(m.start(), "mask-dropped"),
               f"`{m.group(0).strip()}` dropped: {text.splitlines()[ln - 1].strip()}",
               text[:m.start()] + text[m.end():])
    for m in ORDER_RE.finditer(code, 0, end):
        if code.rfind("fence(", 0, m.start()) == m.start() - len("fence("):
            continue
        if code[max(0, m.start() - 19):m.start()].endswith("std::sync::atomic::"):
            continue
        kind = op_kind(code, m.start())
        if kind is None or in_switched_branch(code, m.start()):
            continue
        for weaker in WEAKER[kind].get(m.group(1), []):
            ln = line_of(text, m.start())
            yield (*mid(m.start(), f"order-{m.group(1)}-{weaker}"),
                   f"{kind}: Ordering::{m.group(1)} -> Ordering::{weaker}",
                   text[:m.start()] + f"Ordering::{weaker}" + text[m.end():])
    flip = {"<": ["<="], "<=": ["<"], ">": [">="], ">=": [">"], "!=": []}
    tagged = {">": ["!="], "!=": [">"]}
    name = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "!=": "ne"}
    for m in CMP_RE.finditer(code, 0, end):
        op = m.group(1)
        s, e = m.start(1), m.end(1)
        if in_switched_branch(code, s):
            continue
        ln = line_of(text, s)
        to = list(flip[op])
        if in_tag_fn(code, spans, s):
            to += tagged.get(op, [])
        for new_op in to:
            yield (*mid(s, f"cmp-{name[op]}-{name[new_op]}"),
                   f"`{op}` -> `{new_op}`: {text.splitlines()[ln - 1].strip()}",
                   text[:s] + new_op + text[e:])
    lines = text.split("\n")
    code_lines = code.split("\n")
    line_start = [0]
    for l in code_lines:
        line_start.append(line_start[-1] + len(l) + 1)
    last = line_of(text, end) - 1
    for i, cl in enumerate(code_lines[:last]):
        if not FENCE_RE.search(cl):
            continue
        first, lastl = fence_unit(code_lines, i)
        site = line_start[i] + len(cl) - len(cl.lstrip())
        j = first - 1
        while j >= 0 and is_blank_or_comment(lines[j]):
            j -= 1
        s = code_lines[j].strip() if j >= 0 else ""
        if ".store(" in s and s.endswith(";") and s.count("(") == s.count(")"):
            new = lines[:j] + lines[j + 1:lastl + 1] + [lines[j]] + lines[lastl + 1:]
            yield (*mid(site, "store-after-fence"),
                   f"store moved after the fence: {s}", "\n".join(new))
        k = lastl + 1
        while k < len(lines) and is_blank_or_comment(lines[k]):
            k += 1
        s = code_lines[k].strip() if k < len(lines) else ""
        if ".load(" in s and s.endswith(";") and s.count("(") == s.count(")"):
            # Moved above the fence unit and the comments that lead into it.
            top = first
            while top > 0 and lines[top - 1].strip().startswith("//"):
                top -= 1
            new = lines[:top] + [lines[k]] + lines[top:k] + lines[k + 1:]
            yield (*mid(site, "load-before-fence"),
                   f"load moved before the fence: {s}", "\n".join(new))


def comment_above(lines, ln):
    """The comment block right above 1-based line `ln` (or ending on it),
    joined: where a survivor's reason stands."""
    i = ln - 1
    text = lines[i] if i < len(lines) else ""
    own = text.split("//", 1)[1].strip() if "//" in text else ""
    block = []
    j = i - 1
    while j >= 0 and lines[j].strip().startswith("//"):
        block.insert(0, lines[j].strip().lstrip("/").strip())
        j -= 1
    if not block and j >= 0 and not lines[j].strip().endswith((";", "{", "}", ",")):
        # The statement starts on an earlier line: its comment stands above
        # that line.
        k = j
        while k >= 0 and not lines[k].strip().startswith("//") and not \
                lines[k].strip().endswith((";", "{", "}")):
            k -= 1
        while k >= 0 and lines[k].strip().startswith("//"):
            block.insert(0, lines[k].strip().lstrip("/").strip())
            k -= 1
    return " ".join(block + ([own] if own else []))


def report(tsv, src, how):
    """A markdown table of mutants.sh's results."""
    rows = [l.rstrip("\n").split("\t") for l in open(tsv) if l.strip()]
    texts = {}
    out = ["# Mutation check report", "",
           f"Written by `scripts/mutants.sh` ({how}). One row per mutant: what",
           "killed it (the first loom model, or with `--tests` the first failing",
           "test, to fail), or for a survivor the comment at its line, which",
           "says why it survives (an ordering stronger than needed, an",
           "equivalent mutant, or an ordering required for a reason no check",
           "here can show).", ""]
    counts = {}
    for r in rows:
        counts[r[2]] = counts.get(r[2], 0) + 1
    out.append(", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + ".")
    out.append("")
    out.append("| mutant | change | outcome | killed by / reason at the site |")
    out.append("|---|---|---|---|")
    esc = lambda x: x.replace("|", "\\|").replace("\n", " ")
    for r in rows:
        mid, loc, outcome, by, secs, desc = (r + [""] * 6)[:6]
        path, line = loc.rsplit(":", 1)[0], int(loc.rsplit(":", 1)[1])
        if outcome == "SURVIVED":
            if path not in texts:
                texts[path] = open(f"{src}/{path}").read().split("\n")
            why = comment_above(texts[path], line)
            by = why if why else "(no comment at the line)"
        if len(by) > 300:
            by = by[:297] + "..."
        out.append(f"| `{mid}` | {esc(desc)} | {outcome} | {esc(by)} |")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "report":
        sys.stdout.write(report(*sys.argv[2:]))
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "list":
        for path in sys.argv[2:]:
            text = open(path).read()
            for mid, loc, desc, _ in mutants(path, text):
                print(f"{mid}\t{loc}\t{desc}")
        return 0
    if len(sys.argv) == 5 and sys.argv[1] == "apply":
        mid, src, dest = sys.argv[2:]
        path = mid.split(":")[0]
        text = open(f"{src}/{path}").read()
        for m, _, _, new in mutants(path, text):
            if m == mid:
                open(f"{dest}/{path}", "w").write(new)
                return 0
        print(f"no mutant {mid}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
