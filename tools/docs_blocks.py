#!/usr/bin/env python3
"""Runs every fenced code block of README.md and docs/*.md, so the documentation cannot rot.

Why: the README and the guides under docs/ show commands, scripts and outputs that readers
copy. Each of them is run here, in CI (.ci/run), against a real strata, or checked as far as a
block can be checked (YAML parses, flags exist, JSON parses, an output matches); a block that is
not run says why in a marker, and the run fails on any block it cannot place. It also checks
that every relative link (`](path#anchor)`, `](#anchor)`) reaches a file and a heading in it.

    python3 tools/docs_blocks.py                 # everything (CI)
    python3 tools/docs_blocks.py --skip-rust     # without the cargo build of the Rust blocks
    python3 tools/docs_blocks.py --only docs/regions.md:54    # a block (after those above it in its section)
    python3 tools/docs_blocks.py --list          # what would run, and how

How a block runs, by its info string:

* `sh`/`bash`: `bash -euo pipefail`, in a fresh temporary folder that holds links to the
  clone's top-level entries (so `tests/python/x.py` and `target/pyenv/bin/python` resolve as
  from the clone's root, while files a block writes land in the folder), with `strata` on PATH
  (STRATA_BIN, default target/debug/strata), HOME a fresh folder and STRATA_PORT the port of
  the server the block runs against.
* `python`: target/pyenv/bin/python (the venv with azure-cosmos that .ci/run makes).
* `rust`: wrapped in `#[tokio::main] async fn main()` in a scratch crate under
  target/docs-blocks/ that depends on sdk/, built with CARGO_TARGET_DIR=target.
* Anything else, or a block that is not to be run, needs a marker (below).

The server: unless a `server` block above it in the same section started one, each block that
runs gets its own `strata --in-memory --port <free port> --log warn`. Blocks are written for
the default port, so 8081 in a block becomes that port, as .ci/examples.sh does for the
quickstart (8082, the second region of `--regions`, becomes the port after it, and 8091 the
port ten above it). PostgreSQL's 5432 becomes a free port, /tmp/strata-pg a fresh folder, and
the host `db` of a connection URL 127.0.0.1. A comment `# prints "X"` or `# ends with "X"` in
a block is checked against its output. Variables of strata and of the official emulators
(STRATA_*, PORT, PROTOCOL, AZURE_COSMOS_EMULATOR_*...) are cleared, bar STRATA_PORT.

Markers, an HTML comment on the line right above the fence, `<!-- docs-blocks: ... -->`:

* `covered by WHAT`: not run, because CI runs it elsewhere (builds, long benchmarks).
* `not run: WHY`: not run, and why (recorded outputs, pseudo-code).
* `server`: a block that starts strata in the foreground, as a reader would. There `strata`
  without a subcommand starts the real binary in the background and returns once it has
  printed `Started` and accepts connections; the blocks below it in its section run against
  it, until the next `server` block. A second server the block starts on a port the first
  holds (an alternative form) is started on spare ports, with a data folder of its own,
  checked and stopped. `after the block below` runs it after the next block (its setup).
* `setup: postgres`: the block starts a PostgreSQL cluster; `apt-get install` there only checks
  that the package is installed (.ci/run installs it), `runuser -u USER --` runs the command
  directly when not root, and the cluster is stopped at the end.
* `setup: entra`: TENANT is set (the tests' tenant id), and downloading that tenant's signing
  keys from login.microsoftonline.com yields tests/data/entra/jwks.json instead.
* `needs docker`: not run (CI has no Docker daemon). sh: `bash -n`, and the Dockerfile exists
  when it builds; YAML: it parses. Every `strata SUBCOMMAND --flag` named must exist.
* `synopsis`: a usage line with [optional] parts: its subcommands and flags must exist.
* `excerpt of PATH`: lines from a script that a block below runs whole: what the excerpt calls
  must be in that script (or the modules it imports from its folder).
* `banner`: what the server prints at start, compared line by line with a real start.
* `plan`: a query, a blank line and its plan: compared with the x-strata-query-plan strata
  returns for it on a /TenantId/UserId/SessionId container with 4 physical partitions.
* `schema`: PostgreSQL DDL: the tables it names and its schema_version must be those of the
  store that the blocks above it (the PostgreSQL ones) made.
* `output of the block above`: its lines (bar those with `...`/`…`/<placeholders>) must appear
  in the output of the block above.
* `wire shape`: a request or response shape; JSON blocks must parse unless they hold
  placeholders.
"""

from __future__ import annotations

import argparse
import base64
import builtins
import hashlib
import hmac
import json
import keyword
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
# The tenant of tests/rbac.rs's real-token test; any id works against tests/data/entra/jwks.json.
TEST_TENANT = "0b6f3d1e-5c42-4d1a-9d5e-3f2a1c0e7b11"
PYTHON = ROOT / "target" / "pyenv" / "bin" / "python"
PLACEHOLDER = re.compile(r"\.\.\.|…|<[^<>\s][^<>]*>")
MARKER = re.compile(r"^\s*<!--\s*docs-blocks:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^`\s]*)(.*)$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
BLOCK_TIMEOUT = 600


# --- Reading the documents ------------------------------------------------------------------

@dataclass
class Block:
    file: str           # path relative to the clone
    line: int           # line of the opening fence, 1-based
    lang: str
    text: str           # the content, the fence's indentation removed
    marker: str | None
    section: int        # index of the `#`/`##` heading it is under
    order: int = 0

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def kind(self) -> str:
        """What the harness does with it: run, or the marker's kind."""
        m = (self.marker or "").lower()
        for kind in ("covered by", "not run", "server", "needs docker", "synopsis", "excerpt of",
                     "banner", "plan", "schema", "output of the block above", "wire shape"):
            if m.startswith(kind):
                return kind
        return "run"


def documents() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def parse(path: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of a Markdown file, and its headings (outside fences), in order."""
    lines = path.read_text().split("\n")
    blocks, headings, section = [], [], 0
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            h = HEADING.match(lines[i])
            if h:
                headings.append(h.group(2))
                if len(h.group(1)) <= 2:
                    section += 1
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
        body, j = [], i + 1
        while j < len(lines):
            close = lines[j].strip()
            if close.startswith(fence[0] * len(fence)) and not close.strip(fence[0]):
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
            j += 1
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        blocks.append(Block(str(path.relative_to(ROOT)), i + 1, lang, "\n".join(body) + "\n",
                            marker.group(1) if marker else None, section))
        i = j + 1
    return blocks, headings


def run_order(blocks: list[Block]) -> list[Block]:
    """Document order, except that a block marked `after the block below` follows that block."""
    out = list(blocks)
    i = 0
    while i < len(out) - 1:
        if "after the block below" in (out[i].marker or ""):
            out[i], out[i + 1] = out[i + 1], out[i]
            i += 1
        i += 1
    for n, b in enumerate(out):
        b.order = n
    return out


# --- Links ----------------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: no markup, lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def anchors(headings: list[str]) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings:
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def prose(path: Path) -> list[tuple[int, str]]:
    """The lines outside fences, inline code removed."""
    out, fence = [], None
    for n, line in enumerate(path.read_text().split("\n"), 1):
        m = FENCE.match(line)
        if m and (fence is None or m.group(2).startswith(fence)):
            fence = None if fence else m.group(2)
            continue
        if fence is None:
            out.append((n, re.sub(r"`[^`]*`", "", line)))
    return out


def check_links() -> list[str]:
    """Every relative link of the documents must reach a file, and a heading when it names one."""
    heads = {p.resolve(): anchors(parse(p)[1]) for p in documents()}
    problems = []
    for path in documents():
        for n, line in prose(path):
            for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
                if re.match(r"[a-z]+:", target):
                    continue
                file, _, anchor = target.partition("#")
                dest = (path.parent / file).resolve() if file else path.resolve()
                where = f"{path.relative_to(ROOT)}:{n}"
                if not dest.exists():
                    problems.append(f"{where} link {target}: no file {file}")
                elif anchor and anchor not in (heads[dest] if dest in heads else
                                               anchors(parse(dest)[1]) if dest.suffix == ".md" else set()):
                    problems.append(f"{where} link {target}: no heading #{anchor} in {file or path.name}")
    return problems


# --- Ports, servers and requests ------------------------------------------------------------

def free_port_base(gaps=(0, 1, 10)) -> int:
    """A port P with P, P+1 and P+10 free: a server, its second region and a second process."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + max(gaps) < 65000 and all(port_free(base + g) for g in gaps):
            return base


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def wait_port(port: int, proc: subprocess.Popen | None = None, seconds: float = 30) -> bool:
    end = time.time() + seconds
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            return False
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


def stop_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    end = time.time() + 10
    for pid in pids:
        while time.time() < end and alive(pid):
            time.sleep(0.05)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    """Whether a process still runs (one the harness started is reaped here once it exited)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0]:
            return False
    except ChildProcessError:
        pass    # not the harness's child: a server a block started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class Server:
    """A strata the harness or a `server` block started; `base` is the port 8081 becomes."""
    base: int
    pids: list[int] = field(default_factory=list)

    def ports(self) -> dict[str, str]:
        return {"8081": str(self.base), "8082": str(self.base + 1), "8091": str(self.base + 10)}

    def stop(self) -> None:
        stop_pids(self.pids)


def cosmos(endpoint: str, method: str, path: str, body=None, headers=None):
    """A request signed with the account key, as the SDKs sign theirs (docs/PROTOCOL.md 2.2)."""
    segs = [urllib.parse.unquote(s) for s in path.strip("/").split("/")]
    kind, link = (segs[-1], "/".join(segs[:-1])) if len(segs) % 2 else (segs[-2], "/".join(segs))
    date = formatdate(usegmt=True)
    text = f"{method.lower()}\n{kind.lower()}\n{link}\n{date.lower()}\n\n"
    sig = base64.b64encode(hmac.new(base64.b64decode(KEY), text.encode(), hashlib.sha256).digest())
    h = {"x-ms-date": date, "x-ms-version": "2020-07-15", "content-type": "application/json",
         "authorization": urllib.parse.quote(f"type=master&ver=1.0&sig={sig.decode()}")}
    h.update(headers or {})
    req = urllib.request.Request(endpoint.rstrip("/") + path, method=method, headers=h,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.headers, json.load(r)


# --- The environment blocks run in ------------------------------------------------------------

SERVER_SHIM = r'''
# docs-blocks: `strata` without a subcommand starts a server in the background and returns
# once it accepts connections (a reader runs it in the foreground of a terminal of its own).
strata() {
  case "${1:-}" in ""|-*) ;; *) command strata "$@"; return ;; esac
  local a prev="" port="${STRATA_PORT:-8081}" explicit="" spare=""
  for a in "$@"; do
    case "$a" in -h|--help|-V|--version) command strata "$@"; return ;; --port=*) port="${a#--port=}"; explicit=1 ;; esac
    if [ "$prev" = --port ]; then port="$a"; explicit=1; fi
    prev="$a"
  done
  local home="$HOME"
  if [ -z "$explicit" ] && grep -q " $port\$" "$DOCS_BLOCKS_SERVERS" 2> /dev/null; then
    spare=1; port="$DOCS_BLOCKS_SPARE_PORT"; home="$HOME/spare-$port"; mkdir -p "$home"
  fi
  HOME="$home" STRATA_PORT="$port" command strata "$@" > "strata-$port.log" 2>&1 < /dev/null &
  local pid=$! i
  for i in $(seq 300); do
    kill -0 "$pid" 2> /dev/null || break
    if grep -q '^Started' "strata-$port.log" && (echo > "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then break; fi
    sleep 0.1
  done
  if ! kill -0 "$pid" 2> /dev/null || ! grep -q '^Started' "strata-$port.log"; then
    echo "docs-blocks: strata $* did not start:"; cat "strata-$port.log"
    echo "strata $*" >> "$DOCS_BLOCKS_SERVERS.failed"; kill "$pid" 2> /dev/null || true; return 1
  fi
  if [ -n "$spare" ]; then
    echo "docs-blocks: strata $* served (on spare port $port) and was stopped: the blocks below use the first"
    kill "$pid"; wait "$pid" || true
  else
    disown "$pid"   # it outlives the block; the harness stops it
    echo "$pid $port" >> "$DOCS_BLOCKS_SERVERS"
    echo "docs-blocks: strata $* serves on port $port"
  fi
}
'''

APT_SHIM = r'''#!/usr/bin/env bash
# docs-blocks: installing is .ci/run's job; here `apt-get install` checks the packages are there.
[ "${1:-}" = install ] || exec "$DOCS_BLOCKS_REAL_APT" "$@"
shift
for p in "$@"; do
  case "$p" in -*) continue ;; esac
  dpkg -s "$p" > /dev/null 2>&1 || { echo "docs-blocks: package $p is not installed (.ci/run installs it)" >&2; exit 1; }
done
echo "docs-blocks: apt-get install $*: installed already, not re-run"
'''

RUNUSER_SHIM = r'''#!/usr/bin/env bash
# docs-blocks: not root, so `runuser -u USER -- CMD` runs CMD as this user.
while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done
shift
exec "$@"
'''

CURL_SHIM = r'''#!/usr/bin/env bash
# docs-blocks: a tenant's signing keys are the tests' throwaway ones (tests/data/entra/).
for a in "$@"; do
  case "$a" in https://login.microsoftonline.com/*/discovery/v2.0/keys) exec cat "$DOCS_BLOCKS_JWKS" ;; esac
done
exec "$DOCS_BLOCKS_REAL_CURL" "$@"
'''

# Variables of strata or of the official emulators that would change how a block's strata runs.
FOREIGN_ENV = re.compile(r"^(STRATA_|XDG_|AZURE_COSMOS_EMULATOR_|PORT$|PROTOCOL$|DATA_PATH$|LOG_LEVEL$|ENABLE_EXPLORER$)")


class Harness:
    def __init__(self, strata_bin: Path, skip_rust: bool):
        self.skip_rust = skip_rust
        self.tmp = Path(tempfile.mkdtemp(prefix="docs-blocks-"))
        self.bin = self.tmp / "bin"
        self.bin.mkdir()
        (self.bin / "strata").symlink_to(strata_bin)
        self.shims = self.tmp / "shims"
        self.shims.mkdir()
        self.write_shim("apt-get", APT_SHIM)
        self.write_shim("curl", CURL_SHIM)
        if os.geteuid() != 0:
            self.write_shim("runuser", RUNUSER_SHIM)
        # PostgreSQL runs as its own user, which must reach its data folder: a sticky /tmp folder.
        self.pg_parent = Path(tempfile.mkdtemp(prefix="docs-blocks-pg-"))
        self.pg_parent.chmod(0o1777)
        self.pg_port = free_port_base((0,))
        self.section_server: Server | None = None
        self.section_key: tuple[str, int] | None = None
        self.help_cache: dict[str, str] = {}
        self.outputs: dict[tuple[str, int], str] = {}

    def write_shim(self, name: str, text: str) -> None:
        p = self.shims / name
        p.write_text(text)
        p.chmod(0o755)

    def env(self, home: Path, port: int, extra: dict | None = None) -> dict:
        env = {k: v for k, v in os.environ.items() if not FOREIGN_ENV.match(k)}
        env.update({
            "PATH": f"{self.bin}:{self.shims}:{env.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(home), "STRATA_PORT": str(port), "NO_COLOR": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            "DOCS_BLOCKS_REAL_APT": shutil.which("apt-get") or "/usr/bin/apt-get",
            "DOCS_BLOCKS_REAL_CURL": shutil.which("curl") or "/usr/bin/curl",
            "DOCS_BLOCKS_JWKS": str(ROOT / "tests" / "data" / "entra" / "jwks.json"),
        })
        env.update(extra or {})
        return env

    def workdir(self, block: Block) -> tuple[Path, Path]:
        """A fresh folder for the block, with the clone's top-level entries linked in, and a HOME."""
        name = re.sub(r"[^A-Za-z0-9]+", "-", block.where)
        work = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.tmp))
        for entry in ROOT.iterdir():
            if entry.name not in (".git",):
                (work / entry.name).symlink_to(entry)
        home = work / ".home"
        home.mkdir()
        return work, home

    def substitute(self, text: str, server: Server | None) -> str:
        ports = server.ports() if server else {}
        ports["5432"] = str(self.pg_port)
        for old, new in ports.items():
            text = re.sub(rf"\b{old}\b", new, text)
        text = text.replace("/tmp/strata-pg", str(self.pg_parent / "strata-pg"))
        return re.sub(r"@db:", "@127.0.0.1:", text)

    def start_strata(self, args: list[str], home: Path) -> tuple[Server, subprocess.Popen]:
        base = free_port_base()
        proc = subprocess.Popen([str(self.bin / "strata"), "--port", str(base), *args],
                                env=self.env(home, base), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        return Server(base, [proc.pid]), proc

    def own_server(self, home: Path, args=("--in-memory", "--log", "warn")) -> Server:
        server, proc = self.start_strata(list(args), home)
        if not wait_port(server.base, proc):
            out = proc.communicate(timeout=5)[0] if proc.poll() is not None else ""
            raise Failure(f"strata {' '.join(args)} did not start:\n{out}")
        proc.stdout.close()
        return server

    def strata_help(self, sub: str) -> str:
        if sub not in self.help_cache:
            args = [sub, "--help"] if sub else ["--help"]
            r = subprocess.run([str(self.bin / "strata"), *args], capture_output=True, text=True)
            self.help_cache[sub] = r.stdout if r.returncode == 0 else ""
        return self.help_cache[sub]

    def close(self) -> None:
        if self.section_server:
            self.section_server.stop()
        self.stop_postgres()
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.pg_parent, ignore_errors=True)

    def stop_postgres(self) -> None:
        data = self.pg_parent / "strata-pg"
        if (data / "postmaster.pid").exists():
            cmd = ["/usr/lib/postgresql/15/bin/pg_ctl", "-D", str(data), "-m", "immediate", "stop"]
            if os.geteuid() == 0:
                cmd = ["runuser", "-u", "postgres", "--", *cmd]
            subprocess.run(cmd, capture_output=True)


class Failure(Exception):
    pass


# --- What each kind of block does -----------------------------------------------------------

def run_process(cmd: list[str], cwd: Path, env: dict) -> tuple[int, str]:
    """Runs a block's process in a session of its own, so that a timeout kills all it started."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return 124, out + f"\n(timed out after {BLOCK_TIMEOUT} s)"
    return proc.returncode, out


def check_promised_output(block: Block, out: str) -> None:
    """`# prints "X"`: X must be a line of the block's output; `# ends with "X"`: a line must
    end with X."""
    lines = [l.strip() for l in out.splitlines()]
    for verb, comment in re.findall(r"#\s*(prints|ends with)\b(.*)$", block.text, re.M):
        for want in re.findall(r'"([^"]*)"', comment):
            found = want in lines if verb == "prints" else any(l.endswith(want) for l in lines)
            if not found:
                raise Failure(f"the block says it {verb} {want!r}; its output:\n{out}")


def do_sh(h: Harness, block: Block, server: Server, is_server: bool) -> str:
    work, home = h.workdir(block)
    script = h.substitute(block.text, server)
    extra = {}
    if is_server:
        servers = work / ".servers"
        script = SERVER_SHIM + script + "\nwait\n"
        extra = {"DOCS_BLOCKS_SERVERS": str(servers), "DOCS_BLOCKS_SPARE_PORT": str(free_port_base())}
    if "setup: entra" in (block.marker or ""):
        extra["TENANT"] = TEST_TENANT
    path = work / ".block.sh"
    path.write_text(script)
    code, out = run_process(["bash", "-euo", "pipefail", str(path)], work, h.env(home, server.base, extra))
    if is_server:
        started = [int(l.split()[0]) for l in (work / ".servers").read_text().split("\n") if l.strip()] \
            if (work / ".servers").exists() else []
        server.pids.extend(started)
        if (work / ".servers.failed").exists() or not started:
            raise Failure(f"a server of the block did not start:\n{out}")
    if code != 0:
        raise Failure(f"exit {code}:\n{out}")
    check_promised_output(block, out)
    h.outputs[(block.file, block.line)] = out
    return "ran ok"


def do_python(h: Harness, block: Block, server: Server) -> str:
    if not PYTHON.exists():
        raise Failure(f"needs {PYTHON.relative_to(ROOT)}, the venv with azure-cosmos that .ci/run makes")
    work, home = h.workdir(block)
    (work / ".block.py").write_text(h.substitute(block.text, server))
    code, out = run_process([str(PYTHON), ".block.py"], work, h.env(home, server.base))
    if code != 0:
        raise Failure(f"exit {code}:\n{out}")
    check_promised_output(block, out)
    h.outputs[(block.file, block.line)] = out
    return "ran ok"


def rust_crate(block: Block, source: str) -> Path:
    """A scratch crate for a Rust fragment, with the workspace's lock file and build profiles,
    so that it builds against what the workspace compiled already."""
    name = "docs-block-" + re.sub(r"[^a-z0-9]+", "-", block.where.lower()).strip("-")
    crate = ROOT / "target" / "docs-blocks" / name
    (crate / "src").mkdir(parents=True, exist_ok=True)
    workspace = (ROOT / "Cargo.toml").read_text()
    profiles = workspace[workspace.index("\n[profile."):] if "\n[profile." in workspace else ""
    (crate / "Cargo.toml").write_text(f"""[package]
name = "{name}"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
strata-sdk = {{ path = "{ROOT / 'sdk'}" }}
tokio = {{ version = "1", features = ["macros", "rt-multi-thread"] }}
serde_json = "1"

# Not a member of the clone's workspace: a workspace of its own.
[workspace]
{profiles}""")
    shutil.copy(ROOT / "Cargo.lock", crate / "Cargo.lock")
    body = "\n".join("    " + l if l else l for l in source.rstrip("\n").split("\n"))
    (crate / "src" / "main.rs").write_text(
        "#![allow(unused)] // fragments bind values they do not use\n"
        "#[tokio::main]\nasync fn main() -> Result<(), Box<dyn std::error::Error>> {\n"
        f"{body}\n    Ok(())\n}}\n")
    return crate


def do_rust(h: Harness, block: Block, server: Server) -> str:
    if h.skip_rust:
        return "skipped (--skip-rust)"
    crate = rust_crate(block, h.substitute(block.text, server))
    home = Path(os.environ.get("HOME", h.tmp))    # cargo's registry and toolchains
    env = h.env(home, server.base, {"CARGO_TARGET_DIR": str(ROOT / "target")})
    code, out = run_process(["cargo", "run", "-q"], crate, env)
    if code != 0:
        raise Failure(f"exit {code}:\n{out}")
    return "ran ok"


def named_commands(h: Harness, text: str) -> list[str]:
    """`strata SUBCOMMAND --flag ...` named in a text: each must exist. Returns what was checked."""
    subs = set(re.findall(r"^  ([a-z]+)\s{2,}", h.strata_help(""), re.M)) - {"help"}
    checked = []
    for line in re.sub(r"\\\n", " ", text).split("\n"):
        for m in re.finditer(r"\bstrata[ \t]+([a-z]+)\b", line):
            sub, rest = m.group(1), re.split(r"[|;&#]", line[m.end():])[0]
            if sub in subs:
                check_flags(h, sub, rest)
                checked.append(f"strata {sub}")
    return checked


def check_flags(h: Harness, sub: str, rest: str) -> None:
    """Each --flag in rest must be one of `strata sub --help`'s."""
    help_text = h.strata_help(sub)
    for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text):
            raise Failure(f"strata {sub} has no flag {flag} (strata {sub} --help)")


def parse_yaml(text: str) -> object:
    """The YAML parsed by PyYAML, here or in target/pyenv; else a structural check."""
    try:
        import yaml  # noqa: PLC0415
    except ImportError:
        yaml = None
    if yaml:
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise Failure(f"YAML does not parse:\n{e}")
    if PYTHON.exists():
        parse = ("import json, sys\ntry:\n    import yaml\nexcept ImportError:\n    sys.exit(3)\n"
                 "print(json.dumps(yaml.safe_load(sys.stdin)))")
        r = subprocess.run([str(PYTHON), "-c", parse], input=text, capture_output=True, text=True)
        if r.returncode == 0:
            return json.loads(r.stdout)
        if r.returncode != 3:
            raise Failure(f"YAML does not parse:\n{r.stderr}")
    for n, line in enumerate(text.split("\n"), 1):
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise Failure(f"YAML line {n} is indented with a tab")
    return text


def strings_in(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings_in(k) + strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return [value] if isinstance(value, str) else []


def do_docker(h: Harness, block: Block) -> str:
    if block.lang == "yaml":
        parsed = parse_yaml(block.text)
        checked = named_commands(h, "\n".join(strings_in(parsed)))
        what = "YAML parses" + (f"; the commands it names exist: {', '.join(checked)}" if checked else "")
    else:
        r = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
        if r.returncode != 0:
            raise Failure(f"bash -n: {r.stderr}")
        if re.search(r"docker build\b.*\s\.\s*$", block.text, re.M) and not (ROOT / "Dockerfile").exists():
            raise Failure("docker build . without a Dockerfile")
        checked = named_commands(h, block.text)
        what = "syntax ok" + (f"; the commands it names exist: {', '.join(checked)}" if checked else "")
    return f"needs docker: not run; {what}"


def do_synopsis(h: Harness, block: Block) -> str:
    checked = named_commands(h, block.text)
    if not checked:
        raise Failure("a synopsis naming no strata subcommand")
    return f"synopsis: the flags of {', '.join(sorted(set(checked)))} exist"


def do_excerpt(h: Harness, block: Block, blocks: list[Block]) -> str:
    path = ROOT / re.match(r"excerpt of (\S+?),?(\s|$)", block.marker).group(1)
    if not path.exists():
        raise Failure(f"no file {path.relative_to(ROOT)}")
    rel = str(path.relative_to(ROOT))
    if not any(rel in b.text for b in blocks if b.file == block.file and b.line > block.line and b.kind() == "run"):
        raise Failure(f"no block below runs {rel}")
    source = path.read_text()
    for mod in re.findall(r"^from (\w+) import", source, re.M):
        if (path.parent / f"{mod}.py").exists():
            source += (path.parent / f"{mod}.py").read_text()
    known = set(dir(builtins)) | set(keyword.kwlist)
    missing = [n for n in sorted(set(re.findall(r"([A-Za-z_]\w*)\s*\(", block.text)))
               if n not in known and not re.search(rf"\b{n}\b", source)]
    if missing:
        raise Failure(f"the excerpt calls {', '.join(missing)}, which {rel} does not")
    return f"excerpt of {rel}: its calls are there"


def compare_lines(expected: list[str], actual: str) -> None:
    """Each expected line without a placeholder must be a line of the actual output."""
    have = {l.rstrip() for l in actual.splitlines()}
    for line in expected:
        if line.strip() and not PLACEHOLDER.search(line) and line.rstrip() not in have:
            raise Failure(f"no line {line.strip()!r} in the output:\n{actual}")


def do_banner(h: Harness, block: Block) -> str:
    work, home = h.workdir(block)
    server, proc = h.start_strata([], home)
    lines, end = [], time.time() + 30
    try:
        while time.time() < end:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith("Started"):
                break
    finally:
        server.stop()
    expected = h.substitute(block.text, server).replace("/home/you", str(home)).split("\n")
    if not lines or not lines[0].startswith(expected[0].split(" (")[0]):
        raise Failure("the first line differs:\n" + "\n".join(lines))
    compare_lines(expected, "\n".join(lines))
    return "banner matches a real start"


def do_plan(h: Harness, block: Block) -> str:
    query, _, plan = block.text.partition("\n\n")
    work, home = h.workdir(block)
    server = h.own_server(home, ("--in-memory", "--log", "warn", "--initial-partitions", "4"))
    try:
        ep = f"http://127.0.0.1:{server.base}"
        cosmos(ep, "POST", "/dbs", {"id": "app"})
        cosmos(ep, "POST", "/dbs/app/colls", {"id": "events", "partitionKey": {
            "paths": ["/TenantId", "/UserId", "/SessionId"], "kind": "MultiHash", "version": 2}})
        headers, _ = cosmos(ep, "POST", "/dbs/app/colls/events/docs", {"query": query.strip(), "parameters": []}, {
            "content-type": "application/query+json", "x-ms-documentdb-isquery": "true",
            "x-ms-documentdb-query-enablecrosspartition": "true", "x-strata-explain": "true"})
    finally:
        server.stop()
    got = headers.get("x-strata-query-plan", "").replace("\\n", "\n")
    if got.strip() != plan.strip():
        raise Failure(f"strata's plan:\n{got}\n--- the block's:\n{plan}")
    return "plan matches strata's"


def do_schema(h: Harness, block: Block) -> str:
    """The tables the block names, and its schema_version, against the store of PostgreSQL's
    blocks above (which must have run: the whole file, or --only FILE)."""
    if not (h.pg_parent / "strata-pg" / "postmaster.pid").exists():
        raise Failure("no PostgreSQL running: the blocks above that start it and strata on it run first")
    psql = ["/usr/lib/postgresql/15/bin/psql", "-h", "127.0.0.1", "-p", str(h.pg_port), "-U", "strata",
            "-d", "postgres", "-Atc"]
    tables = subprocess.run(psql + ["select tablename from pg_tables where schemaname = 'strata'"],
                            capture_output=True, text=True)
    version = subprocess.run(psql + ["select value from strata.meta where name = 'schema_version'"],
                             capture_output=True, text=True)
    if tables.returncode or version.returncode:
        raise Failure(f"psql: {tables.stderr}{version.stderr}")
    named = set(re.findall(r"CREATE TABLE strata\.(\w+)", block.text))
    for more in re.findall(r"one table per key space: (.*)$", block.text, re.M):
        named |= {w.strip() for w in more.split(",")}
    have = set(tables.stdout.split())
    if named != have:
        raise Failure(f"the block names tables {sorted(named)}; the store has {sorted(have)}")
    want = re.search(r"schema_version = (\d+)", block.text).group(1)
    if version.stdout.strip() != want:
        raise Failure(f"schema_version is {version.stdout.strip()}, the block says {want}")
    return f"schema: the {len(have)} tables and schema_version {want} are the store's"


def do_output(h: Harness, block: Block, previous: Block | None) -> str:
    if previous is None or (previous.file, previous.line) not in h.outputs:
        raise Failure("no block above ran")
    compare_lines(block.text.split("\n"), h.outputs[(previous.file, previous.line)])
    return f"output matches {previous.where}"


def do_wire(block: Block) -> str:
    if block.lang != "json":
        return "wire shape: not a command"
    try:
        json.loads(block.text)
        return "wire shape: JSON parses"
    except json.JSONDecodeError as e:
        if PLACEHOLDER.search(block.text):
            return "wire shape with placeholders: not parsed"
        raise Failure(f"JSON does not parse: {e}")


# --- The run ----------------------------------------------------------------------------------

def plan_blocks(only: list[str]) -> list[Block]:
    """The blocks to run, in run order; with --only, a block and those above it in its section
    (in its file, for a schema block)."""
    chosen = []
    for path in documents():
        blocks = run_order(parse(path)[0])
        rel = str(path.relative_to(ROOT))
        if not only:
            chosen += blocks
            continue
        for spec in only:
            file, _, line = spec.partition(":")
            if Path(file).as_posix() != rel:
                continue
            if not line:
                chosen += blocks
                continue
            target = next((b for b in blocks if b.line == int(line)), None)
            if target is None:
                sys.exit(f"{spec}: no block starts on that line")
            # A schema block checks what the PostgreSQL blocks of another section made.
            same = (lambda b: True) if target.kind() == "schema" else (lambda b: b.section == target.section)
            chosen += [b for b in blocks if same(b) and b.order <= target.order]
    seen, out = set(), []
    for b in chosen:
        if (b.file, b.line) not in seen:
            seen.add((b.file, b.line))
            out.append(b)
    return out


def describe(block: Block, blocks: list[Block]) -> str:
    """What --list says the run will do with a block."""
    if block.kind() != "run":
        return block.marker
    if block.lang not in ("sh", "bash", "python", "rust"):
        return f"FAILS: a {block.lang or 'untagged'} block without a marker"
    above = [b for b in blocks if b.file == block.file and b.section == block.section
             and b.order < block.order and b.kind() == "server"]
    where = f"against the server of {above[-1].where}" if above else "against a server of its own"
    return f"run {where}" + (f" ({block.marker})" if block.marker else "")


def execute(h: Harness, block: Block, blocks: list[Block], previous: Block | None) -> str:
    kind = block.kind()
    if kind in ("covered by", "not run"):
        return block.marker
    if kind == "needs docker":
        return do_docker(h, block)
    if kind == "synopsis":
        return do_synopsis(h, block)
    if kind == "excerpt of":
        return do_excerpt(h, block, blocks)
    if kind == "banner":
        return do_banner(h, block)
    if kind == "plan":
        return do_plan(h, block)
    if kind == "schema":
        return do_schema(h, block)
    if kind == "output of the block above":
        return do_output(h, block, previous)
    if kind == "wire shape":
        return do_wire(block)
    if not block.lang:
        raise Failure("an untagged block: give it an info string (sh, python, text, ...)")
    if block.lang not in ("sh", "bash", "python", "rust"):
        raise Failure(f"a {block.lang} block the harness cannot run, without a marker saying why")
    return run_against_server(h, block, kind == "server")


def run_against_server(h: Harness, block: Block, is_server: bool) -> str:
    """Runs the block against its section's server, a server it starts, or one of its own."""
    key = (block.file, block.section)
    if h.section_key != key or is_server:
        if h.section_server:
            h.section_server.stop()
        h.section_server, h.section_key = None, key
    if is_server:
        server = Server(free_port_base())
        h.section_server = server
        return "server started: " + do_sh(h, block, server, True)
    if h.section_server:
        return run_block(h, block, h.section_server)
    server = h.own_server(Path(tempfile.mkdtemp(dir=h.tmp)))
    try:
        return run_block(h, block, server)
    finally:
        server.stop()


def run_block(h: Harness, block: Block, server: Server) -> str:
    if block.lang == "python":
        return do_python(h, block, server)
    if block.lang == "rust":
        return do_rust(h, block, server)
    return do_sh(h, block, server, False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[], metavar="FILE[:LINE]",
                    help="only this file, or this block (after the blocks above it in its section)")
    ap.add_argument("--skip-rust", action="store_true", help="do not build and run the rust blocks")
    ap.add_argument("--list", action="store_true", help="list the blocks and what would be done")
    args = ap.parse_args()
    blocks = plan_blocks(args.only)
    if args.list:
        for b in blocks:
            print(f"{b.where} {b.lang or 'untagged'}: {describe(b, blocks)}")
        return 0
    strata_bin = Path(os.environ.get("STRATA_BIN", ROOT / "target" / "debug" / "strata")).resolve()
    for _ in range(120):    # it may be being rebuilt
        if strata_bin.exists():
            break
        time.sleep(1)
    else:
        sys.exit(f"no strata binary at {strata_bin} (STRATA_BIN)")
    h = Harness(strata_bin, args.skip_rust)
    failed, counts = 0, {}
    try:
        previous = None
        for b in blocks:
            start = time.time()
            try:
                result = execute(h, b, blocks, previous)
                kind = "skipped" if result.startswith("skipped") else \
                    "not run" if b.kind() in ("covered by", "not run") else "ok"
                print(f"{b.where} {b.lang or 'untagged'} {result} ({time.time() - start:.1f} s)", flush=True)
            except Exception as e:    # a block's failure, or the harness's: reported, and on to the next
                kind, failed = "failed", failed + 1
                why = str(e) if isinstance(e, Failure) else f"{type(e).__name__}: {e}"
                print(f"{b.where} {b.lang or 'untagged'} FAILED ({time.time() - start:.1f} s): "
                      + why.replace("\n", "\n    "), flush=True)
            counts[kind] = counts.get(kind, 0) + 1
            previous = b
    finally:
        h.close()
    links = [] if args.only else check_links()
    for problem in links:
        print(problem)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"docs blocks: {summary}; {len(links)} broken link(s)")
    return 1 if failed or links else 0


if __name__ == "__main__":
    sys.exit(main())
