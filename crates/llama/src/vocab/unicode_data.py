#!/usr/bin/env python3
"""Writes unicode_data.bin, the Unicode tables the tokenizers use, from llama.cpp's generated
src/unicode-data.cpp (itself made from UnicodeData.txt by llama.cpp's gen-unicode-data.py). We take
the same Unicode version as llama.cpp rather than Python's, because the category of a code point
decides how pre-tokenizers split text and must agree with llama.cpp token for token.

usage: unicode_data.py path/to/unicode-data.cpp OUT.bin

Layout, all little-endian u32: four sections, each a count followed by its records:
  flags ranges   (start, flags)      flags valid from start to the next start - 1
  whitespace     (codepoint)
  lowercase map  (codepoint, lower)  ascending
  nfd ranges     (first, last, nfd)  ascending
"""
import re, struct, sys

src = open(sys.argv[1], encoding="utf-8").read()

def section(name):
    m = re.search(name + r"[^{]*\{(.*?)\n\};", src, re.S)
    return m.group(1)

def records(body, width):
    nums = [int(x, 16) for x in re.findall(r"0x[0-9A-Fa-f]+", body)]
    assert len(nums) % width == 0
    return [nums[i:i + width] for i in range(0, len(nums), width)]

out = bytearray()
for name, width in [("unicode_ranges_flags", 2), ("unicode_set_whitespace", 1),
                    ("unicode_map_lowercase", 2), ("unicode_ranges_nfd", 3)]:
    recs = records(section(name), width)
    out += struct.pack("<I", len(recs))
    for r in recs:
        out += struct.pack("<%dI" % width, *r)
open(sys.argv[2], "wb").write(out)
