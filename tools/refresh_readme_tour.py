"""The README's tour: its ```console blocks, run in order as a newcomer runs them, and rewritten from a new run.

Run ``.venv/bin/python tools/refresh_readme_tour.py`` after a tour command's output changes: it runs every
block on a fresh workspace and rewrites the shown output (``--check`` only compares, as
``tests/cli/test_readme_tour.py`` does).

A block is ```` ```console [lines=A-B,C-] [width=N] ````; each ``$ CMD`` line is a command run by bash in the
repository root with ``.venv/bin`` first on ``PATH``, followed by its shown output (stdout; a command ending
in `` &`` runs in the background with stdout and stderr together, until its output is shown, and is stopped
at the end). In the shown output a line ``...`` stands for any lines and a line ending in `` [...]`` for any
line that starts with the text before it. ``lines`` keeps those line ranges of a refreshed output (1-based),
``width`` cuts longer lines. Timings, trace ids, ports and the workspace's path are masked before comparing.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
REFRESH = ".venv/bin/python tools/refresh_readme_tour.py"
PORT = "8765"  # the port the README shows; the run uses a free one
ANY, CUT = "...", " [...]"
FENCE = re.compile(r"^```console(?P<opts>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)
MASKS = [
    (re.compile(r"\b[0-9a-f]{16}\b"), "<id>"),                        # trace ids
    (re.compile(r"(127\.0\.0\.1|localhost):\d+"), rf"\1:{PORT}"),       # the port of the run
    (re.compile(r'"loaded_at":\s*[0-9.]+'), '"loaded_at": <time>'),
    (re.compile(r"\b\d+(\.\d+)? ?s\b"), "<s> s"),                       # seconds are timings; ms are results
]


@dataclass
class Command:
    text: str
    shown: list[str] = field(default_factory=list)

    @property
    def background(self) -> bool:
        return self.text.endswith(" &")


@dataclass
class Block:
    span: tuple[int, int]  # the body's place in the README
    lines: str
    width: int
    commands: list[Command]


def parse(text: str) -> list[Block]:
    """Every ```console block of the README, in order."""
    blocks = []
    for m in FENCE.finditer(text):
        opts = dict(o.split("=", 1) for o in m["opts"].split() if "=" in o)
        commands: list[Command] = []
        for line in m["body"].splitlines():
            if line.startswith("$ "):
                commands.append(Command(line[2:]))
            elif commands:
                commands[-1].shown.append(line)
        blocks.append(Block(m.span("body"), opts.get("lines", ""), int(opts.get("width", "100")), commands))
    return blocks


def normalize(lines: list[str], home: str = "") -> list[str]:
    """Lines as compared: masked, right-stripped, without trailing blank lines."""
    out = []
    for line in lines:
        if home:
            line = line.replace(home, "$ORACLE_HOME")
        for pattern, mask in MASKS:
            line = pattern.sub(mask, line)
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def matches(shown: list[str], got: list[str]) -> bool:
    """Whether ``got`` is what ``shown`` shows, ``...`` and `` [...]`` as wildcards."""
    if not shown:
        return not got
    head, rest = shown[0], shown[1:]
    if head == ANY:
        return any(matches(rest, got[i:]) for i in range(len(got) + 1))
    if not got:
        return False
    same = got[0].startswith(head[: -len(CUT)]) if head.endswith(CUT) else got[0] == head
    return same and matches(rest, got[1:])


def trim(lines: list[str], ranges: str, width: int) -> list[str]:
    """What a refreshed block shows: the kept line ranges, ``...`` for each gap, long lines cut."""
    keep = range(len(lines))
    if ranges:
        picked: list[int] = []
        for part in ranges.split(","):
            a, _, b = part.partition("-")
            picked += range(int(a) - 1, int(b) if b else len(lines))
        keep = sorted(i for i in set(picked) if i < len(lines))
    out, last = [], -1
    for i in keep:
        if i != last + 1:
            out.append(ANY)
        line = lines[i].rstrip()
        out.append(line[: width - len(CUT)] + CUT if len(line) > width else line)
        last = i
    if keep and last < len(lines) - 1:
        out.append(ANY)
    return out


class Tour:
    """The tour's commands run on a fresh workspace; background ones stopped, the database too, at exit."""

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="oracle-tour-")
        self.home = str(Path(self.tmp.name) / "oracle")
        self.port = _free_port()
        self.env = {**os.environ, "ORACLE_HOME": self.home, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb",
                    "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.background: list[subprocess.Popen[str]] = []

    def run(self, cmd: Command, timeout: float = 600) -> tuple[int, list[str]]:
        """Exit code and output lines of one command (the background ones: 0 while they run)."""
        text = cmd.text.replace(f":{PORT}", f":{self.port}").replace(f"--port {PORT}", f"--port {self.port}")
        if cmd.background:
            return self._start(text[:-2], cmd.shown)
        p = subprocess.run(["bash", "-c", text], cwd=REPO, env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        lines = p.stdout.splitlines()
        return p.returncode, lines if p.returncode == 0 else lines + p.stderr.splitlines()

    def _start(self, text: str, shown: list[str], timeout: float = 120) -> tuple[int, list[str]]:
        p = subprocess.Popen(["bash", "-c", f"exec {text}"], cwd=REPO, env=self.env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append(p)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x.rstrip("\n")) for x in p.stdout], daemon=True).start()
        got: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and p.poll() is None:
            try:
                got.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            ready = matches(normalize(shown, self.home), normalize(got, self.home)) if shown else "://" in got[-1]
            if ready:
                _wait_for_port(self.port, deadline) if str(self.port) in text else None
                return 0, got
        return (p.poll() or 1), got

    def close(self) -> None:
        for p in self.background:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
        subprocess.run(["bash", "-c", "oracle db stop"], cwd=REPO, env=self.env, capture_output=True, timeout=120)
        self.tmp.cleanup()


def refresh(text: str) -> str:
    """The README with every tour block's output shown from a new run."""
    tour = Tour()
    try:
        parts, end = [], 0
        for block in parse(text):
            body = []
            for cmd in block.commands:
                code, got = tour.run(cmd)
                if code != 0:
                    raise SystemExit(f"`{cmd.text}` exited {code}:\n" + "\n".join(got[-20:]))
                body += [f"$ {cmd.text}", *trim(normalize(got, tour.home), block.lines, block.width)]
            parts += [text[end:block.span[0]], "\n".join(body) + "\n"]
            end = block.span[1]
        return "".join(parts) + text[end:]
    finally:
        tour.close()


def check(text: str) -> list[str]:
    """What differs between the README's tour and a new run of it: one entry per command, empty when none."""
    tour, problems = Tour(), []
    try:
        for block in parse(text):
            for cmd in block.commands:
                code, got = tour.run(cmd)
                want, have = normalize(cmd.shown, tour.home), normalize(got, tour.home)
                if code != 0:
                    problems.append(f"`{cmd.text}` exited {code}:\n" + "\n".join(have[-20:]))
                elif not matches(want, have):
                    problems.append(f"`{cmd.text}` printed:\n" + "\n".join(have) + "\nthe README shows:\n"
                                    + "\n".join(want))
        return problems
    finally:
        tour.close()


def _wait_for_port(port: int, deadline: float) -> None:
    """A server may say where it listens before it does: wait until it accepts a connection."""
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str]) -> int:
    text = README.read_text()
    if "--check" in argv:
        problems = check(text)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print(f"the README's tour and the tool disagree: run `{REFRESH}`", file=sys.stderr)
        return 1 if problems else 0
    README.write_text(refresh(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
