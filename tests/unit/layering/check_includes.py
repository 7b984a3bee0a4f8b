#!/usr/bin/env python3
"""The include rules that keep the layers apart (docs/library.md, "Layers inside"), checked on the source tree.

  apps/, plugins/, tools/, preload/  include only installed public headers ("rawpipe/...", present in
                           include/rawpipe/) and headers of their own folder (apps/rawpipe/...
                           for apps/rawpipe/**), so every app is proof that the library is enough;
  pipeline/                never includes pmd/: drivers depend on the core, not the reverse.

usage: check_includes.py SOURCE_ROOT FOLDER...
Prints every offending FILE:LINE with the include and the rule it breaks; exits 1 if any.
"""
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".inc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# Top-level folders of the tree that only the library itself (or its tests) may include.
INTERNAL_ROOTS = ("pipeline/", "pmd/", "tests/", "apps/", "plugins/", "tools/", "preload/")
PUBLIC_ONLY = {"apps", "plugins", "tools", "preload"}


def own_folder(rel: pathlib.PurePosixPath) -> pathlib.PurePosixPath:
    """apps/rawpipe for apps/rawpipe/doctor/x.cc; plugins for plugins/x.c."""
    return rel.parents[-3] if len(rel.parts) > 2 else rel.parents[-2]


def public_only_violation(root, rel, quote, target):
    if quote == "<" and not target.startswith("rawpipe/"):
        # System headers are fine; the tree reached through -I. or -Iinclude is not.
        if target.startswith(INTERNAL_ROOTS) or target == "rawpipe_config.h":
            return "reaches into the source tree with <...>; use an installed public header (rawpipe/...)"
        return None
    if target.startswith("rawpipe/"):
        # Written by hand, or generated at configure time from a template beside it.
        if (root / "include" / target).is_file() or (root / "include" / (target + ".in")).is_file():
            return None
        return f"include/{target} does not exist: not a public header"
    own = own_folder(rel)
    # A quoted include resolves against the including file's directory first, then the tree root.
    for candidate in (root / rel.parent / target, root / target):
        try:
            resolved = candidate.resolve().relative_to(root)
        except ValueError:
            continue
        if candidate.is_file():
            if pathlib.PurePosixPath(resolved.as_posix()).is_relative_to(own):
                return None
            return f"{resolved.as_posix()} is outside {own}/ and not a public header (rawpipe/...)"
    # Generated at build time from a template in the including file's own folder (version_info.h
    # from version_info.h.in): the folder's own header, written into the build directory.
    template = root / rel.parent / (target + ".in")
    if template.is_file() and pathlib.PurePosixPath(template.relative_to(root).as_posix()).is_relative_to(own):
        return None
    return f"not a public header (rawpipe/...) nor a header of {own}/"


def core_violation(root, rel, quote, target):
    if target.startswith("pmd/"):
        return "pipeline/ includes a driver header; the core must not depend on pmd/ (move what it needs into pipeline/port/)"
    return None


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1]).resolve()
    offences, files = [], 0
    for folder in argv[2:]:
        base = root / folder
        if not base.is_dir():
            print(f"check_includes: {base} is not a directory", file=sys.stderr)
            return 2
        rule = public_only_violation if folder.split("/")[0] in PUBLIC_ONLY else core_violation
        for path in sorted(base.rglob("*")):
            if not path.is_file() or path.suffix not in SOURCE_SUFFIXES:
                continue
            files += 1
            rel = pathlib.PurePosixPath(path.relative_to(root).as_posix())
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    why = rule(root, rel, m.group(1), m.group(2))
                    if why:
                        offences.append(f"{rel}:{number}: #include {m.group(1)}{m.group(2)}"
                                        f"{'>' if m.group(1) == '<' else chr(34)}: {why}")
    for o in offences:
        print(o)
    if offences:
        print(f"check_includes: {len(offences)} forbidden include(s) in {' '.join(argv[2:])}", file=sys.stderr)
        return 1
    print(f"check_includes: {files} files in {' '.join(argv[2:])} keep the include rules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
