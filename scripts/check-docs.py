#!/usr/bin/env python3
"""Checks that the documents still describe the tree (run by .ci/run).

    python3 scripts/check-docs.py

Fails, printing `FILE:LINE: what` once per problem, when

1. DESIGN.md is over 40,960 bytes;
2. DESIGN.md's code map (the table under "## Code map") names a path that
   does not exist, or a source file under src/ (other than a `mod.rs`,
   which its folder's row covers) is not named there. In a row, a name
   starting with a top-level entry of the tree (`src/`, `tests/`, ...) is
   a path from the root; any other is in the folder of the row's first
   path, or in the folder named just before the parentheses it stands in;
3. any file of the repository cites `DESIGN.md, "Section"` or
   `BENCHMARKS.md, "Section"` (comma optional, several quoted names after
   one another allowed, over comment line breaks) and a quoted name is not
   a heading of that document;
4. a markdown file names a path outside the repository: a `../` path that
   leaves it, or does not exist, or an absolute path under /work, /home or
   /root. The mutation report is exempt: its rows quote tool output.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DESIGN_MAX = 40 * 1024
TEXT_EXT = (".rs", ".md", ".sh", ".py", ".toml")
PATH_EXT = (".rs", ".sh", ".py", ".md", ".toml")

problems = []


def problem(path, line, what):
    problems.append(f"{path}:{line}: {what}")


def files():
    """Tracked and untracked, not ignored, files of the tree."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return sorted({f for f in out.splitlines() if os.path.isfile(os.path.join(ROOT, f))})


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read()


def headings(path):
    """Every heading of a markdown file (fenced code skipped)."""
    out, fenced = set(), False
    for line in read(path).split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                out.add(m.group(1))
    return out


def check_size():
    n = os.path.getsize(os.path.join(ROOT, "DESIGN.md"))
    if n > DESIGN_MAX:
        problem("DESIGN.md", 1, f"{n:,} bytes, over the bound of {DESIGN_MAX:,}")
    return n


def row_paths(text, base, top):
    """(name, path) for every path a code-map row names. A name whose first
    part is a top-level entry of the tree is a path from the root; any other
    is in the row's folder, or in the folder named just before the
    parentheses it stands in (`disk/` (`format.rs`, ...))."""
    out, stack, last_dir, pos = [], [base], None, 0
    for m in re.finditer(r"`([^`]*)`|\(|\)", text):
        if text[pos:m.start()].strip():
            last_dir = None
        pos = m.end()
        if m.group(0) == "(":
            stack.append(last_dir or stack[-1])
            last_dir = None
            continue
        if m.group(0) == ")":
            if len(stack) > 1:
                stack.pop()
            last_dir = None
            continue
        tok, last_dir = m.group(1), None
        if not re.fullmatch(r"[\w./-]+", tok) or not tok.endswith(("/",) + PATH_EXT):
            continue
        path = tok if tok.split("/")[0] in top and "/" in tok else os.path.join(stack[-1], tok)
        out.append((tok, os.path.normpath(path)))
        if tok.endswith("/"):
            last_dir = path
    return out


def check_code_map(tree):
    lines = read("DESIGN.md").split("\n")
    start = next((i for i, l in enumerate(lines) if l.strip() == "## Code map"), None)
    if start is None:
        problem("DESIGN.md", 1, 'no "## Code map" section')
        return 0
    top = {f.split("/")[0] for f in tree}
    named = set()
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.startswith("## "):
            break
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        first = re.findall(r"`([^`]+)`", cells[0])
        if not first or first[0] == "path":
            continue
        base = first[0] if first[0].endswith("/") else os.path.dirname(first[0])
        for tok, path in row_paths(" | ".join(cells), base, top):
            full = os.path.join(ROOT, path)
            if not (os.path.isdir(full) if tok.endswith("/") else os.path.isfile(full)):
                problem("DESIGN.md", i + 1, f"the code map names `{tok}`, but {path} does not exist")
            named.add(path)
    for f in tree:
        if f.startswith("src/") and f.endswith(".rs") and os.path.basename(f) != "mod.rs" \
                and os.path.normpath(f) not in named:
            problem("DESIGN.md", start + 1, f"the code map does not name {f}")
    return len(named)


COMMENT = re.compile(r"^\s*(//[/!]?|#+|\*)?\s?")
CITE = re.compile(r'\b(DESIGN|BENCHMARKS)\.md,?\s+("[^"]{1,100}"(?:\s*,\s*"[^"]{1,100}")*)')


def check_cites(tree):
    known = {"DESIGN": headings("DESIGN.md"), "BENCHMARKS": headings("BENCHMARKS.md")}
    count = 0
    for f in tree:
        if not (f.endswith(TEXT_EXT) or f == ".ci/run") or f == "scripts/check-docs.py":
            continue
        text = read(f)
        if "DESIGN.md" not in text and "BENCHMARKS.md" not in text:
            continue
        # Join the lines, comment markers dropped, so that a citation broken
        # over two comment lines reads as one; remember where each line starts.
        joined, starts = [], []
        pos = 0
        for line in text.split("\n"):
            starts.append(pos)
            body = line
            if not f.endswith(".md"):
                body = COMMENT.sub("", line, count=1)
            joined.append(body.strip())
            pos += len(joined[-1]) + 1
        flat = " ".join(joined)
        for m in CITE.finditer(flat):
            ln = max(i for i, s in enumerate(starts) if s <= m.start()) + 1
            for name in re.findall(r'"([^"]+)"', m.group(2)):
                count += 1
                if name not in known[m.group(1)]:
                    problem(f, ln, f'cites {m.group(1)}.md, "{name}", which is not a heading there')
    return count


OUTSIDE = re.compile(r"(?<![\w/.])((?:\.\./)+[\w./-]*[\w/])")
ABSOLUTE = re.compile(r"(?<![\w.~])(/(?:work|home|root)/[\w./-]+)")


def check_outside(tree):
    for f in tree:
        if not f.endswith(".md") or f == "scripts/mutants-report.md":
            continue
        here = os.path.dirname(os.path.join(ROOT, f))
        for i, line in enumerate(read(f).split("\n")):
            for m in OUTSIDE.finditer(line):
                full = os.path.realpath(os.path.join(here, m.group(1)))
                if not (full == ROOT or full.startswith(ROOT + os.sep)):
                    problem(f, i + 1, f"names {m.group(1)}, outside the repository")
                elif not os.path.exists(full):
                    problem(f, i + 1, f"names {m.group(1)}, which does not exist")
            for m in ABSOLUTE.finditer(line):
                problem(f, i + 1, f"names {m.group(1)}, outside the repository")


def main():
    tree = files()
    size = check_size()
    paths = check_code_map(tree)
    cites = check_cites(tree)
    check_outside(tree)
    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"check-docs: ok (DESIGN.md {size:,} bytes, {paths} code-map paths, "
          f"{cites} section cites)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
