#!/usr/bin/env python3
"""Writes a C++ header holding a text file as `inline constexpr std::string_view NAME`.

Usage: embed_text.py INPUT OUTPUT NAME. The text goes in a raw string literal; a file that
contains the delimiter is refused rather than cut short.
"""
import sys

src, out, name = sys.argv[1:4]
text = open(src, encoding="utf-8").read()
delim = "rawpipe_embed"
if ")" + delim + '"' in text:
    sys.exit(f"{src}: contains the raw string delimiter ){delim}\"; pick another in {sys.argv[0]}")
with open(out, "w", encoding="utf-8") as f:
    f.write(f"// Generated from {src.split('/')[-1]} by embed_text.py; edit that file.\n#pragma once\n"
            f"#include <string_view>\n"
            f"inline constexpr std::string_view {name} = R\"{delim}({text}){delim}\";\n")
