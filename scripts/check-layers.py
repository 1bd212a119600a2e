#!/usr/bin/env python3
"""Checks every #include "smol/..." under include/smol/ and in the programs against the Layout
table in docs/library.md (moved there from README.md with the rest of "The library").

Each library folder row names the folders its headers may include ("core, quant"; "everything
above": the folders of the rows above it; "std only": none). A header may always include its own
folder. The programs' row names the program folders (`examples/`, `bench/`, `tools/`) and the only
library headers their .cpp and .hpp files may include (`smol/smol.hpp`, `smol/hub.hpp`), with
quotes or angle brackets. Exit status 1 lists each include that breaks a rule, with file and line."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
layout_doc = "docs/library.md"
readme = (root / layout_doc).read_text()
rows = re.findall(r"^\| `include/smol/(\w+)/` \| [^|]* \| ([^|]*) \|$", readme, re.M)
if not rows:
    sys.exit(f"check-layers: expected {layout_doc}'s Layout table (| `include/smol/FOLDER/` | ... | may include |), found none")

allowed = {}
for i, (folder, rule) in enumerate(rows):
    rule = rule.strip()
    if rule == "std only":
        allowed[folder] = set()
    elif rule == "everything above":
        allowed[folder] = {f for f, _ in rows[:i]}
    else:
        allowed[folder] = {f.strip() for f in rule.split(",")}
    unknown = allowed[folder] - {f for f, _ in rows}
    if unknown:
        sys.exit(f"check-layers: {layout_doc} row for {folder}/ names folders the table lacks: {sorted(unknown)}")

programs_row = re.search(r"^\| ((?:`\w+/`(?:, )?)+) \| [^|]* \| ([^|]*) \|$", readme, re.M)
if not programs_row:
    sys.exit(f"check-layers: expected {layout_doc}'s Layout table to have the programs' row "
             "(| `examples/`, `bench/`, `tools/` | ... | `smol/smol.hpp`, ... |), found none")
program_folders = re.findall(r"`(\w+)/`", programs_row.group(1))
program_allowed = set(re.findall(r"`(smol/[\w/.]+)`", programs_row.group(2)))
if not program_allowed:
    sys.exit(f"check-layers: the programs' row names no `smol/...` header they may include: {programs_row.group(0)}")

broken = []
headers = sorted((root / "include" / "smol").glob("*/*.hpp"))
for header in headers:
    folder = header.parent.name
    if folder not in allowed:
        broken.append(f"{header.relative_to(root)}: folder {folder}/ has no row in {layout_doc}'s Layout table")
        continue
    for n, line in enumerate(header.read_text().splitlines(), 1):
        m = re.match(r'\s*#\s*include\s+"smol/(\w+)/', line)
        if m and m.group(1) != folder and m.group(1) not in allowed[folder]:
            broken.append(f"{header.relative_to(root)}:{n}: {folder}/ may include {sorted(allowed[folder]) or 'std only'}, "
                          f"found {line.strip()}")
programs = sorted(f for folder in program_folders for f in (root / folder).rglob("*")
                  if f.suffix in (".cpp", ".hpp") and "node_modules" not in f.parts)
for source in programs:
    for n, line in enumerate(source.read_text().splitlines(), 1):
        m = re.match(r'\s*#\s*include\s+["<](smol/[^">]+)[">]', line)
        if m and m.group(1) not in program_allowed:
            broken.append(f"{source.relative_to(root)}:{n}: a program may include {sorted(program_allowed)} "
                          f"and nothing else under smol/, found {line.strip()}")

for b in broken:
    print(b)
print(f"check-layers: {len(headers)} headers in {len(allowed)} folders and {len(programs)} program files in "
      f"{', '.join(f + '/' for f in program_folders)}, {len(broken)} includes break the layout rules")
sys.exit(1 if broken else 0)
