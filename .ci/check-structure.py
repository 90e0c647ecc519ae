#!/usr/bin/env python3
"""The house rules a reviewer would otherwise count by hand: no source file
over 400 lines and no function (or lambda) body over 80 lines, in every C++,
CUDA and Python file git tracks (data, corpora and notebooks aside).
Exit 1 listing every offender, 0 when the tree keeps the rules."""
import re
import subprocess
import sys

MAX_FILE, MAX_FUNCTION = 400, 80
SOURCE = re.compile(r"\.(cpp|hpp|cu|cuh|h|py)$")
SKIP = re.compile(r"^tests/fuzz/corpus/|^tests/data/")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|else|do|try|namespace|struct|class|union|enum|extern)\b[^;]*$")
SIGNATURE = re.compile(r"\)\s*(const|override|final|noexcept|mutable|->\s*[\w:<>,\s*&]+|\s)*\{\s*$")


def strip(line, state):
    """The line without strings, chars and comments; state carries /* */."""
    out, i = [], 0
    while i < len(line):
        if state["block"]:
            j = line.find("*/", i)
            if j < 0:
                return "".join(out)
            state["block"], i = False, j + 2
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"], i = True, i + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < len(line) and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def cpp_functions(lines):
    """(start line, length) of every function or lambda body."""
    state, stack, found, header = {"block": False}, [], [], ""
    for n, raw in enumerate(lines, 1):
        code = strip(raw, state)
        for k, ch in enumerate(code):
            if ch == "{":
                before = (header + " " + code[:k]).rstrip()
                is_fn = bool(SIGNATURE.search(before + "{")) and not CONTROL.search(before.split(";")[-1])
                stack.append((n, is_fn))
            elif ch == "}" and stack:
                start, is_fn = stack.pop()
                if is_fn:
                    found.append((start, n - start + 1))
        header = code if code.strip() and not code.rstrip().endswith((";", "{", "}")) else ""
    return found


def py_functions(lines):
    found, open_defs = [], []
    for n, line in enumerate(lines + [""], 1):
        indent = len(line) - len(line.lstrip())
        if line.strip():
            while open_defs and indent <= open_defs[-1][1]:
                start, _ = open_defs.pop()
                found.append((start, last - start + 1))
            last = n
        if re.match(r"\s*(async\s+)?def\s", line):
            open_defs.append((n, indent))
    return found


def main():
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    problems = []
    for path in files:
        if not SOURCE.search(path) or SKIP.search(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        if len(lines) - 1 > MAX_FILE:
            problems.append(f"{path}: {len(lines) - 1} lines (at most {MAX_FILE})")
        functions = py_functions(lines) if path.endswith(".py") else cpp_functions(lines)
        for start, length in functions:
            if length > MAX_FUNCTION:
                problems.append(f"{path}:{start}: function of {length} lines (at most {MAX_FUNCTION})")
    for p in problems:
        print(p)
    print(f"check-structure: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
