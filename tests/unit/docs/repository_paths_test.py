#!/usr/bin/env python3
"""Every repository path that README.md and docs/*.md name in backticks exists: a file or folder of
the source tree, or a build output or test of this build (`apps/rawpipe/rawpipe`,
`plugins/out_of_tree_build`). Paths with a placeholder (DIR, N, <name>, *) are not checked.

  tests/unit/docs/repository_paths_test.py SOURCE_ROOT BUILD_ROOT

Headers moved to include/rawpipe/ and programs moved to tests/bench/ while the docs kept naming the
old places; this fails on the next such move, naming the file and line.
"""
import json
import os
import re
import sys

TOP = ("apps", "configs", "contrib", "debian", "dist", "docs", "include", "pipeline", "plugins", "pmd", "preload",
       "services", "tests", "tools")


def build_names(build):
    """Build outputs (relative to the build root) and test names of this build."""
    names = set()
    info = os.path.join(build, "meson-info")
    for t in json.load(open(os.path.join(info, "intro-targets.json"))):
        names.update(os.path.relpath(f, build) for f in t["filename"])
    names.update(t["name"] for t in json.load(open(os.path.join(info, "intro-tests.json"))))
    return names


def named_paths(text):
    """(line, path) for each token of a backticked span that starts with a top-level folder."""
    for m in re.finditer(r"`([^`\n]+)`", text):
        for tok in m.group(1).split():
            tok = tok.strip("'\"(),;")
            if not tok.startswith(tuple(t + "/" for t in TOP)):
                continue
            # `file.hh::Name`, `file.cc:120`, `file.md#anchor`, `f(...)`: the file part.
            tok = re.split(r"::|\(|:\d|#", tok)[0].rstrip(".,;:)")
            if re.search(r"[*<>{}$]|\b[A-Z][A-Z_]+\b", tok):
                continue
            yield text.count("\n", 0, m.start()) + 1, tok


def main():
    source, build = sys.argv[1], sys.argv[2]
    built = build_names(build)
    docs = [os.path.join(source, "README.md")] + sorted(
        os.path.join(source, "docs", f) for f in os.listdir(os.path.join(source, "docs")) if f.endswith(".md"))
    missing, checked = [], 0
    for doc in docs:
        for line, path in named_paths(open(doc, encoding="utf-8").read()):
            checked += 1
            if not os.path.exists(os.path.join(source, path)) and path not in built:
                missing.append(f"{os.path.relpath(doc, source)}:{line}: `{path}` is neither in the source tree nor "
                               "a build output or test of this build")
    print("\n".join(missing))
    print(f"{checked} repository paths named in {len(docs)} documents, {len(missing)} missing")
    return 1 if missing or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
