#!/usr/bin/env python3
"""Run the commands that README.md and docs/**/*.md show, so the docs cannot drift (issue 32).

    scripts/doc-commands.py --ember build/ember --shared ../shared [-v] [--keep] [FILE.md ...]

What is a command: a line of an indented (4-space) code block, with `\\` continuations joined
and `# comments` dropped, whose first word is `ember`, `build/ember` or `make`. It runs when
it is complete; it is counted, not run, when it is a synopsis: a `[...]` optional part, a
`( ... )` group, an `A|B` alternative in argument position, or a `...`. `make demo|test|asan|
bench` are not run (minutes each; CI runs them itself). Other lines (scripts, python3, curl,
llama.cpp's tools) are counted as "other". `NAME=value` lines set a variable for the file's
later commands (`M=../shared/models`). Every ember line, synopsis or not, must name only
--flags that its command's `--help` lists, so a renamed flag cannot survive in a synopsis.

Where: each doc file runs in its own scratch directory, in document order, with `ember` on
PATH and `build/ember` beside it; `../shared` is the shared directory, as in a checkout. The
placeholders the docs use (M.gguf, LEFT, conv.json, ...) are replaced from PLACEHOLDERS below,
the one table; the fixtures it names are made first (FIXTURES).

Markers, an HTML comment in the lines just before a block (invisible when rendered), each
applying to the block's commands that contain SUBSTRING (all of them when it is left out):

    <!-- doc-test: exit N ["SUBSTRING"][: WHY] -->    the command must exit N (default 0); N|M: either
                                                      (a verdict on measured time can go both ways)
    <!-- doc-test: skip ["SUBSTRING"]: REASON -->     not run; the summary lists the reason
    <!-- doc-test: sub "OLD" "NEW": REASON -->        run with OLD replaced by NEW (a cheaper size)

A marker whose SUBSTRING (or OLD) is in none of the block's commands is an error, so a marker
cannot outlive its command. Exit status: 0 all ran as expected, 1 a command failed, 2 bad use.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# The one table: placeholder (a whole shell word in a doc command) -> what it stands for.
# {models} = SHARED/models, {tok} = SHARED/tokenizer, {fx} = fixtures made by FIXTURES,
# {repo} = the checkout. Names a command writes (snap/, calib, mapper, F, ...) are not here:
# the docs' own commands create them, in order.
PLACEHOLDERS = {
    'M.gguf': '{models}/stories260K.gguf',
    'M': '{models}/stories260K.gguf',
    'M-F32.gguf': '{models}/stories260K.gguf',
    'M1.gguf': '{models}/stories260K.gguf',
    'M2.gguf': '{models}/stories260K-Q8_0.gguf',
    'A.gguf': '{models}/stories260K.gguf',
    'B.gguf': '{models}/stories260K-Q8_0.gguf',
    'S.gguf': '{models}/stories260K.gguf',
    'T.gguf': '{models}/stories260K-kjv-top.gguf',
    'LEFT': '{fx}/left',               # stories260K, 'Once upon a time'
    'RIGHT': '{fx}/right',             # stories260K-Q8_0, the same prompt
    'DIR': '{fx}/left',
    'NATIVE': '{fx}/left',
    'SNAPSHOT': '{fx}/left',
    'SNAPSHOT_DIR': '{fx}/left',
    'MAPPED_DIR': '{fx}/mapped',       # map hybrid stories260K -> stories260K-kjv-top
    'slot.bin': '{models}/llamacpp-state/stories260K.p1.f16.fa0.seq',
    'conv.json': '{fx}/conv.json',
    'prompts.jsonl': '{fx}/prompts.jsonl',
    'prompt.txt': '{fx}/prompt.txt',
    'qwen3/tokenizer.json': '{tok}/qwen3/tokenizer.json',
    'qwen3/tokenizer_config.json': '{tok}/qwen3/tokenizer_config.json',
    'tokenizer.json': '{tok}/qwen3/tokenizer.json',
    'tokenizer_config.json': '{tok}/qwen3/tokenizer_config.json',
    'receipt.json': '{repo}/schemas/examples/bridge-receipt.valid.identity.json',
    'pack.json': '{repo}/schemas/examples/domcap1.valid.probe-checks.json',
    'tools.json': '{repo}/schemas/examples/tool-allowlist.valid.host.json',
    'ENTRY.json': '{repo}/schemas/examples/translator-registry.valid.hybrid.json',
    'N': '4',
    'TEXT': "'Once upon a time'",
    'URI': 'dir:kvstore',
    'NS': '{ns}',                      # the namespace of stories260K's states (store ls prints it)
    'dir:/srv/kv': 'dir:{fx}/store',   # holds LEFT under the name intro
    'redis://ember@10.0.0.5:6379': 'redis://ember@127.0.0.1:{redis}',   # a redis-server we start
    'models.txt': '{fx}/models.txt',
    'ids.txt': '{fx}/ids.txt',
}

# Files and snapshots the placeholders point at, made once before any doc runs ({fx}).
FIXTURES = [
    ('conv.json', '[{"role": "system", "content": "You are brief."}, '
                  '{"role": "user", "content": "Once upon a time"}]\n'),
    ('prompts.jsonl', '{"id": "chat-1", "text": "Once upon a time"}\n'
                      '{"id": "story-2", "text": "The little dog"}\n'),
    ('prompt.txt', 'Once upon a time\n'),
    ('models.txt', '{models}/stories260K.gguf\n'),
    ('ids.txt', '1,403,407,261,378\n'),
    ('left', ['kv', 'export', '-m', '{models}/stories260K.gguf', '-p', 'Once upon a time',
              '-o', '{fx}/left']),
    ('right', ['kv', 'export', '-m', '{models}/stories260K-Q8_0.gguf', '-p', 'Once upon a time',
               '-o', '{fx}/right']),
    ('store', ['store', 'put', 'dir:{fx}/store', '{fx}/left', '--name', 'intro']),
    ('mapped', ['map', 'hybrid', '--source', '{models}/stories260K.gguf',
                '--target', '{models}/stories260K-kjv-top.gguf', '-p', 'Once upon a time',
                '-n', '2', '--relation', 'same-base', '--output', '{fx}/mapped']),
]

LONG_MAKE = {'demo', 'test', 'asan', 'bench'}
MARKER = re.compile(r'<!--\s*doc-test:\s*(.*?)\s*-->')


class BadDoc(Exception):
    """A marker that is malformed or picks no command: exit 2, as bad input."""


@dataclass
class Cmd:
    file: str
    line: int
    text: str                     # as the doc shows it, joined, comments dropped
    expect: frozenset = frozenset({0})
    skip: str = ''
    subs: list = field(default_factory=list)

    def run_text(self):
        text = self.text
        for old, new in self.subs:
            text = text.replace(old, new)
        return text


def strip_comment(line):
    """Drops a shell `# comment` (a `#` after whitespace, outside quotes)."""
    quote = ''
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = ''
        elif c in '\'"':
            quote = c
        elif c == '#' and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def blocks(text):
    """Yields (first line number, lines, markers) per indented code block."""
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        prev = lines[i - 1] if i else ''
        if lines[i].startswith('    ') and lines[i].strip() and (not prev.strip() or prev.startswith('#')):
            j = i
            while j < len(lines) and (lines[j].startswith('    ') or not lines[j].strip()):
                j += 1
            while j > i and not lines[j - 1].strip():
                j -= 1
            markers, k = [], i - 1
            while k >= 0 and (not lines[k].strip() or MARKER.fullmatch(lines[k].rstrip())):
                m = MARKER.fullmatch(lines[k].rstrip())
                if m:
                    markers.append((k + 1, m.group(1)))
                k -= 1
            yield i + 1, lines[i:j], markers
            i = j
        else:
            i += 1


def logical_lines(first, lines):
    """Joins `\\` continuations and deeper-indented synopsis lines; drops comment lines."""
    out = []          # [line number, text, continued-with-backslash]
    for n, raw in enumerate(lines, first):
        body = strip_comment(raw)
        if not body.strip():
            continue
        indent = len(raw) - len(raw.lstrip())
        if out and (out[-1][2] or indent > 4):
            out[-1][1] += ' ' + body.strip()
        else:
            out.append([n, body.strip(), False])
        out[-1][2] = out[-1][1].endswith('\\')
        if out[-1][2]:
            out[-1][1] = out[-1][1][:-1].rstrip()
    return [(n, t) for n, t, _ in out]


def words_outside_quotes(text):
    """The text with quoted parts blanked, so synopsis marks inside quotes do not count."""
    return re.sub(r"'[^']*'|\"[^\"]*\"", "''", text)


def kind(text):
    first = text.split()[0]
    if first in ('ember', 'build/ember'):
        bare = words_outside_quotes(text)
        if (re.search(r'[\[\]()]|\.\.\.|…', bare)
                or any('|' in w and w != '|' and w != '||' for w in bare.split())):
            return 'synopsis'
        return 'run'
    if first == 'make':
        return 'long-make' if set(text.split()[1:]) & LONG_MAKE else 'run'
    if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*=\S+', text):
        return 'assign'
    return 'other'


def parse_marker(body, where):
    m = re.fullmatch(r'exit (\d+(?:\|\d+)*)(?: "([^"]*)")?(?:: .+)?', body)
    if m:
        return ('exit', m.group(2), frozenset(int(x) for x in m.group(1).split('|')))
    m = re.fullmatch(r'skip(?: "([^"]*)")?: (.+)', body)
    if m:
        return ('skip', m.group(1), m.group(2))
    m = re.fullmatch(r'sub "([^"]*)" "([^"]*)": (.+)', body)
    if m:
        return ('sub', m.group(1), (m.group(1), m.group(2)))
    raise BadDoc(f'doc-commands: {where}: expected a marker "exit N [\\"S\\"]", '
                     f'"skip [\\"S\\"]: REASON" or "sub \\"OLD\\" \\"NEW\\": REASON", found "{body}"')


def commands(path, rel):
    """Every logical line of every block, with its kind and its markers applied."""
    out = []
    for first, lines, markers in blocks(path.read_text(encoding='utf-8')):
        cmds = [(n, t, kind(t)) for n, t in logical_lines(first, lines)]
        parsed = [(ln, parse_marker(body, f'{rel}:{ln}')) for ln, body in markers]
        for ln, (what, needle, value) in parsed:
            hits = [c for c in cmds if needle is None or needle in c[1]]
            if not hits:
                raise BadDoc(f'doc-commands: {rel}:{ln}: marker names "{needle}", '
                                 f'found in no command of the block at line {first}')
        for n, text, _ in cmds:
            c = Cmd(rel, n, text)
            for _, (what, needle, value) in parsed:
                if needle is not None and needle not in text:
                    continue
                if what == 'exit':
                    c.expect = value
                elif what == 'skip':
                    c.skip = value
                else:
                    c.subs.append(value)
            # A `sub` may drop a synopsis' optional parts, so the kind is judged after it.
            out.append((kind(c.run_text()), c))
    return out


def fill(text, env):
    """{models}, {fx}, ... in a table value (str.format would trip on JSON's braces)."""
    return re.sub(r'\{(\w+)\}', lambda m: str(env[m.group(1)]) if m.group(1) in env else m.group(0), text)


def substitute(text, env):
    """Replaces each placeholder that stands as a whole word (a store reference's URI#NS/NAME
    parts count as words); None when one needs something this machine lacks (redis-server)."""
    for old, new in sorted(PLACEHOLDERS.items(), key=lambda kv: -len(kv[0])):
        pattern = r"(?<![^\s='\"#])" + re.escape(old) + r"(?![^\s'\"#/])"
        if not re.search(pattern, text):
            continue
        if '{redis}' in new and env['redis'] is None:
            return None
        value = fill(new, env)
        text = re.sub(pattern, lambda _: value, text)
    return text


class Help:
    """`ember CMD --help`, cached: the flags every ember line names must be in it, so a synopsis
    (which is not run) still cannot keep a renamed or removed flag."""

    def __init__(self, ember):
        self.ember, self.cache = ember, {}

    def text(self, path):
        key = tuple(path)
        if key not in self.cache:
            r = subprocess.run([self.ember, *path, '--help'], capture_output=True, text=True)
            self.cache[key] = r.stdout
        return self.cache[key]

    def subcommands(self, path):
        text = self.text(path)
        part = text.split('Subcommands:', 1)[1] if 'Subcommands:' in text else ''
        return set(re.findall(r'^  ([a-z][a-z0-9-]*)\b', part, re.M))

    def unknown_flags(self, command):
        """The --long flags of an ember line that its command's --help does not list."""
        words = words_outside_quotes(command).split()[1:]
        paths, i = [[]], 0
        while i < len(words):
            alts = words[i].split('|')
            if not all(a in self.subcommands(paths[0]) for a in alts):
                break
            paths, i = [p + [a] for p in paths for a in alts], i + 1
        flags = sorted(set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*', ' '.join(words[i:]))))
        return [f for f in flags if not any(
            re.search(r'(?<![\w-])' + re.escape(f) + r'(?![\w-])', self.text(p)) for p in paths)]


def make_fixtures(ember, env):
    fx = Path(env['fx'])
    fx.mkdir(parents=True)
    for name, what in FIXTURES:
        if isinstance(what, str):
            (fx / name).write_text(fill(what, env), encoding='utf-8')
            continue
        argv = [ember] + [fill(a, env) for a in what]
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f'doc-commands: fixture {name}: {" ".join(argv)} exited '
                             f'{r.returncode}: {(r.stderr or r.stdout).strip()[:400]}')
    listing = subprocess.run([ember, 'store', 'ls', f'dir:{fx}/store', '--json'],
                             capture_output=True, text=True, check=True).stdout
    env['ns'] = json.loads(listing)[0]['namespace']


def start_redis(scratch, env):
    """A throwaway redis-server on a free port with the README's user `ember`, or None."""
    exe = shutil.which('redis-server')
    if exe is None:
        return None
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    password = 'doc-commands'
    proc = subprocess.Popen([exe, '--port', str(port), '--bind', '127.0.0.1', '--save', '',
                             '--appendonly', 'no', '--dir', str(scratch),
                             '--user', 'default', 'off',
                             '--user', 'ember', 'on', '>' + password, '~*', '&*', '+@all'],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(('127.0.0.1', port), timeout=0.1).close()
            env['redis'] = str(port)
            env['redis_password'] = password
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    return None


def run(text, cwd, env, timeout):
    """(exit status or 'timeout after S s', stdout+stderr, seconds) of one command in bash."""
    start = time.monotonic()
    try:
        r = subprocess.run(['bash', '-c', text], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           errors='replace', timeout=timeout)
        code, out = r.returncode, r.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors='replace') if isinstance(e.stdout, bytes) else (e.stdout or '')
        code = f'timeout after {timeout:.0f} s'
    return code, out, time.monotonic() - start


def head(text, n=6):
    lines = text.strip().split('\n')
    return '\n'.join('      | ' + l[:200] for l in lines[:n]) + ('\n      | ...' if len(lines) > n else '')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ember', required=True, help='the ember binary to run')
    ap.add_argument('--shared', required=True, help='the shared directory (models/, tokenizer/)')
    ap.add_argument('--root', default=str(Path(__file__).resolve().parent.parent),
                    help='the checkout whose docs are run (default: this script\'s)')
    ap.add_argument('--timeout', type=float, default=60, help='seconds per command (default 60)')
    ap.add_argument('--keep', action='store_true', help='keep the scratch directory')
    ap.add_argument('-v', '--verbose', action='store_true', help='print every command run')
    ap.add_argument('files', nargs='*', help='doc files (default: README.md and docs/**/*.md)')
    a = ap.parse_args()

    root = Path(a.root).resolve()
    ember = Path(a.ember).resolve()
    shared = Path(a.shared).resolve()
    for p, what in ((ember, 'ember binary'), (shared / 'models', 'shared models directory')):
        if not p.exists():
            print(f'doc-commands: {what}: expected {p} to exist, found nothing', file=sys.stderr)
            return 2
    files = [Path(f).resolve() for f in a.files] or \
        [root / 'README.md'] + sorted((root / 'docs').rglob('*.md'))

    scratch = Path(tempfile.mkdtemp(prefix='ember-doc-commands-'))
    bindir = scratch / 'bin'
    bindir.mkdir()
    (bindir / 'ember').symlink_to(ember)
    (scratch / 'shared').symlink_to(shared)
    env = {'models': str(shared / 'models'), 'tok': str(shared / 'tokenizer'),
           'fx': str(scratch / 'fixtures'), 'repo': str(root), 'redis': None}
    redis = start_redis(scratch, env)
    base_env = dict(os.environ, PATH=f'{bindir}:{os.environ.get("PATH", "")}', LC_ALL='C.UTF-8')
    if redis is not None:
        base_env['EMBER_REDIS_PASSWORD'] = env['redis_password']   # as the README exports it
    t0 = time.monotonic()
    failed, ran, skipped, counts = [], 0, [], {}
    helps, flag_checked, flag_failed = Help(str(ember)), 0, 0
    try:
        make_fixtures(str(ember), env)
        for f in files:
            rel = str(f.relative_to(root)) if f.is_relative_to(root) else str(f)
            cwd = scratch / re.sub(r'[^A-Za-z0-9]+', '-', rel)
            (cwd / 'build').mkdir(parents=True)
            (cwd / 'build' / 'ember').symlink_to(ember)
            file_env = dict(base_env)
            c = counts.setdefault(rel, {'run': 0, 'synopsis': 0, 'other': 0, 'long-make': 0, 'assign': 0})
            for k, cmd in commands(f, rel):
                if k == 'assign':
                    name, value = cmd.text.split('=', 1)
                    file_env[name] = value
                    c['assign'] += 1
                    continue
                if cmd.text.split()[0] in ('ember', 'build/ember') and not cmd.text.startswith('ember:'):
                    flag_checked += 1
                    unknown = helps.unknown_flags(cmd.text)
                    if unknown:
                        why = ', '.join(unknown) + ': not in its --help'
                        failed.append((cmd, why))
                        flag_failed += 1
                        print(f'FAIL {rel}:{cmd.line}: {cmd.text}\n      {why}', flush=True)
                if k != 'run':
                    c[k] += 1
                    continue
                text = substitute(cmd.run_text(), env)
                if text is None and not cmd.skip:
                    cmd.skip = 'no redis-server on PATH'
                if cmd.skip:
                    skipped.append(cmd)
                    continue
                code, out, secs = run(text, root if text.startswith('make') else cwd,
                                      file_env, a.timeout)
                ran += 1
                c['run'] += 1
                ok = code in cmd.expect
                if a.verbose or not ok:
                    print(f'{"ok  " if ok else "FAIL"} {secs:5.1f}s {rel}:{cmd.line}: {text}', flush=True)
                if not ok:
                    want = ' or '.join(str(x) for x in sorted(cmd.expect))
                    failed.append((cmd, f'exit {code}, expected {want}: {text}'))
                    print(f'      exit {code}, expected {want}\n{head(out)}', flush=True)
    except BadDoc as e:
        print(e, file=sys.stderr)
        return 2
    finally:
        if redis is not None:
            redis.terminate()
            redis.wait()
        if a.keep:
            print(f'scratch kept: {scratch}')
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    run_failed = len(failed) - flag_failed
    print(f'\ndoc-commands: ran {ran}, passed {ran - run_failed}, failed {run_failed}, '
          f'skipped {len(skipped)}; flags of {flag_checked} ember lines checked against --help, '
          f'unknown in {flag_failed} ({time.monotonic() - t0:.0f} s)')
    for rel, c in counts.items():
        if any(c.values()):
            print(f'  {rel}: ran {c["run"]}, synopsis lines {c["synopsis"]}, '
                  f'other lines {c["other"]}' + (f', long make targets {c["long-make"]}'
                                                   if c['long-make'] else ''))
    for cmd in skipped:
        print(f'  skipped {cmd.file}:{cmd.line}: {cmd.text[:100]} ({cmd.skip})')
    for cmd, why in failed:
        print(f'  FAILED {cmd.file}:{cmd.line}: {why}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
