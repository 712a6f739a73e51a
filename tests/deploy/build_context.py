"""What `docker build .` would send as its context, computed the way the Docker client does.

The rules of `.dockerignore` (moby's patternmatcher): patterns are cleaned paths relative to the
context root; `*` and `?` never cross a `/`, `**` matches any number of directories; a pattern
that matches a directory matches everything under it; `!` re-includes; the last pattern that
matches a path decides. The Dockerfile's COPY sources are then looked up in that context.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    exclude: bool
    text: str


def _translate(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.index("]", i)
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def read_rules(path: Path) -> list[Rule]:
    rules = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        exclude = not text.startswith("!")
        body = posixpath.normpath(text.lstrip("!").strip().lstrip("/"))
        rules.append(Rule(_translate(body), exclude, text))
    return rules


def excluded(path: str, rules: list[Rule]) -> bool:
    """Whether ``path`` (relative, with `/`) stays out of the context."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]  # the path and its parents
    verdict = False
    for rule in rules:
        if any(rule.pattern.match(c) for c in candidates):
            verdict = rule.exclude
    return verdict


def context_files(root: Path, rules: list[Rule]) -> set[str]:
    """Every file under ``root`` the context holds. A directory is skipped when it is excluded and
    no re-inclusion rule could bring anything under it back (as the Docker client does)."""
    reinclusions = [r.text.lstrip("!").strip().lstrip("/") for r in rules if not r.exclude]
    found: set[str] = set()
    for directory, subdirs, files in os.walk(root):
        rel = Path(directory).relative_to(root).as_posix()
        rel = "" if rel == "." else rel
        keep = []
        for sub in subdirs:
            path = f"{rel}/{sub}" if rel else sub
            if excluded(path, rules) and not any(
                r.startswith(path + "/") or r.rstrip("/") == path for r in reinclusions
            ):
                continue
            keep.append(sub)
        subdirs[:] = keep
        for name in files:
            path = f"{rel}/{name}" if rel else name
            if not excluded(path, rules):
                found.add(path)
    return found


def copy_sources(dockerfile: Path) -> list[str]:
    """The context paths the Dockerfile's COPY/ADD instructions read (``--from`` stages excluded)."""
    sources = []
    text = dockerfile.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].upper() not in ("COPY", "ADD"):
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if any(w.startswith("--from") for w in words[1:]):
            continue
        sources.extend(args[:-1])
    return sources


def stages(dockerfile: Path) -> list[list[str]]:
    """The instructions of each build stage, as lines."""
    out: list[list[str]] = []
    for line in dockerfile.read_text().replace("\\\n", " ").splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0].upper() == "FROM":
            out.append([])
        if out:
            out[-1].append(line.strip())
    return out
