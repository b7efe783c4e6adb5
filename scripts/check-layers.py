#!/usr/bin/env python3
"""The layering rule, checked: a folder under src/ includes only itself and the folders its
library links directly (CMakeLists.txt's ember_module lines), and links only what it includes.

Layers call downward only (STYLE.md): cli -> contract, map/analysis -> kv -> model -> ops -> gguf -> util,
with tokenizer beside model and perf (ember bench's report) above model. Since the link lists
are a DAG below each folder, an include of a folder that is not linked is either an upward
include (a cycle in the making) or a missing link; both fail here, naming the file and line. Run by CTest (test `Layers.IncludesFollowLinks`).

Usage: check-layers.py [SOURCE_DIR]   exit 0 when clean, 1 with one line per violation.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
cmake = (root / "CMakeLists.txt").read_text()

# ember_module(ember_kv kv ember_model ember_util): folder kv links folders model and util.
links = {}
for name, folder, deps in re.findall(r"^ember_module\((ember_\w+)\s+(\w+)\s*([^)]*)\)", cmake, re.M):
    links[folder] = {d[len("ember_"):] for d in deps.split() if d.startswith("ember_")}
folders = set(links)
# The CLI executable links every library (ember_lib) and is the top layer.
links["cli"] = set(folders)

include = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/')
problems = []
used = {f: set() for f in links}
for folder in sorted(links):
    for path in sorted((root / "src" / folder).glob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = include.match(line)
            if not m or m.group(1) == folder:
                continue
            target = m.group(1)
            used[folder].add(target)
            if target not in links[folder]:
                kind = "an upward include" if folder in links.get(target, set()) or target == "cli" else \
                       "a folder its library does not link"
                problems.append(f"{path.relative_to(root)}:{n}: includes {target}/, {kind} "
                                f"(src/{folder}/ links: {', '.join(sorted(links[folder])) or 'nothing'})")
for folder in sorted(folders):
    for extra in sorted(links[folder] - used[folder]):
        problems.append(f"CMakeLists.txt: ember_{folder} links ember_{extra}, but no file in "
                        f"src/{folder}/ includes {extra}/ (links follow the includes)")

for p in problems:
    print(p)
print(f"check-layers: {len(folders) + 1} folders, {len(problems)} violation(s)")
sys.exit(1 if problems else 0)
