"""Writes the README's picture of the page (docs/page.png): a real server over a fresh workspace, the
shipped example uploaded, its slow step open with the timeline, critical path and findings, a
what-if overlaid and the chat's answer, in Debian's headless chromium.

Usage: ``python tools/page_screenshot.py [OUT.png]`` from the repository root.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bottleneck_oracle.config import Settings  # noqa: E402
from bottleneck_oracle.graphdb import stop_server  # noqa: E402
from tests.server.browser import ask, chromium, open_page, open_step, pick_trace, run_whatif, slow_steps  # noqa: E402
from tests.server.conftest import GPT, serving, upload  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _point_of(page: object, name: str) -> tuple[float, float]:
    """An event of that name brought into view, in client pixels (the tooltip shows over it)."""
    point = page.evaluate("name => window.oracleTimeline.reveal(name)", name)  # type: ignore[attr-defined]
    return point["x"], point["y"]


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "page.png"
    with tempfile.TemporaryDirectory(prefix="page_png_") as home:
        try:
            with serving(Settings(home=Path(home), workers=2)) as url:
                response = upload(url, GPT, name="gpt_2rank")
                response.raise_for_status()
                with chromium() as browser:
                    page, errors = open_page(browser, f"{url}/", width=1400, height=1000)
                    pick_trace(page, response.json()["trace"]["id"])
                    step = slow_steps(page)[0]
                    open_step(page, step, via_slow_mark=True)
                    run_whatif(page, "fix host_pause")
                    ask(page, f"Why is step {step} slow?")
                    page.mouse.move(*_point_of(page, "gloo:all_reduce"))
                    page.wait_for_selector("#tooltip:not([hidden])")
                    out.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(out), full_page=True)
                    if errors:
                        raise RuntimeError(f"the page reported errors: {errors}")
        finally:
            stop_server(Path(home))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
