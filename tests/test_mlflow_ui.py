"""The link a run prints opens its metric charts in MLflow's UI, checked in a real browser.

A live ``mlflow server`` gets a short training run; headless Chromium, driven through the
Chrome DevTools protocol, opens the URL the run printed and reads the rendered page. The
screenshot is saved in the test's tmp_path and its path printed (``pytest -s``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium or chromium-browser on PATH (apt-get install chromium): "
    "the MLflow UI is checked in a real browser",
)

PAGE_WAIT_S = 60.0  # the UI loads its scripts, then the run, then draws each chart

# The card of one metric chart: the largest element around its legend ("<run> (<key>)")
# that holds no other chart of the run. Its text holds the title, the axes' tick labels
# and the x axis' title ("Step") once the chart is drawn.
CHART_CARD_JS = """
(() => {
  const legend = [...document.querySelectorAll('*')].find(
    e => e.children.length === 0 && e.textContent === %(legend)s);
  if (!legend) return null;
  let card = legend;
  while (card.parentElement && card.parentElement.innerText.split(%(run)s).length <= 2)
    card = card.parentElement;
  return card.innerText;
})()
"""
# Links of the page, "text -> href": in the Model training mode its breadcrumb and side
# bar lead to the runs table ("Runs"), in the GenAI mode to evaluation runs.
LINKS_JS = (
    "[...document.querySelectorAll('a')]"
    ".map(a => a.innerText.trim() + ' -> ' + a.getAttribute('href'))"
)


class Browser:
    """Headless Chromium and one page, driven over the DevTools protocol's websocket."""

    def __init__(self, profile: Path) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                CHROMIUM,
                "--headless=new",
                f"--remote-debugging-port={self.port}",
                f"--user-data-dir={profile}",  # a fresh profile: the UI's first-visit view
                "--no-sandbox",  # root in a container has no sandbox to give
                "--disable-gpu",
                "--no-first-run",
                "--window-size=1400,2600",  # tall: the charts below the fold render too
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._ids = 0

    def page_socket(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                url = f"http://127.0.0.1:{self.port}/json/list"
                with urllib.request.urlopen(url, timeout=2) as answer:
                    pages = [t for t in json.load(answer) if t["type"] == "page"]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chromium gave no DevTools endpoint (exit {self.process.poll()})")
            time.sleep(0.2)

    async def call(self, ws, method: str, **params) -> dict:
        self._ids += 1
        ident = self._ids
        await ws.send_json({"id": ident, "method": method, "params": params})
        while True:
            message = await ws.receive_json()
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    async def evaluate(self, ws, expression: str):
        result = await self.call(ws, "Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


async def open_and_read(browser: Browser, url: str, run_name: str, key: str, shot: Path):
    """Open ``url``; wait until the chart of metric ``key`` is drawn (or PAGE_WAIT_S has
    passed); return (final URL, page text, the chart's text, the links), after saving a
    screenshot to ``shot``."""
    import aiohttp  # an MLflow dependency

    card_js = CHART_CARD_JS % {
        "legend": json.dumps(f"{run_name} ({key})"),
        "run": json.dumps(run_name),
    }
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(browser.page_socket(), max_msg_size=0) as ws:
            await browser.call(ws, "Page.enable")
            await browser.call(ws, "Page.navigate", url=url)
            deadline = time.monotonic() + PAGE_WAIT_S
            card = None
            while time.monotonic() < deadline:
                card = await browser.evaluate(ws, card_js)
                if card and "Step" in card:
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(1.0)  # the last charts finish drawing for the screenshot
            where = await browser.evaluate(ws, "location.href")
            text = await browser.evaluate(ws, "document.body.innerText")
            links = await browser.evaluate(ws, LINKS_JS)
            image = await browser.call(ws, "Page.captureScreenshot", format="png")
            shot.write_bytes(base64.b64decode(image["data"]))
    return where, text, card, links


def test_printed_link_opens_the_runs_metric_charts(mlflow_server, tmp_path):
    from mlflow import MlflowClient

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lostcities.train",
            "game=kuhn",
            "network=small",
            "run.iterations=2",
            f"tracking.tracking_uri={mlflow_server.url}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    printed = re.findall(r"^MLflow charts: (\S+)$", done.stderr, re.MULTILINE)
    assert len(printed) == 2 and printed[0] == printed[1], done.stderr
    url = printed[-1]
    client = MlflowClient(tracking_uri=mlflow_server.url)
    (run,) = client.search_runs([client.get_experiment_by_name("lostcities").experiment_id])
    name, experiment_id = run.info.run_name, run.info.experiment_id
    assert url.startswith(f"{mlflow_server.url}/#/experiments/{experiment_id}/runs/")

    shot = tmp_path / "mlflow_run_charts.png"
    browser = Browser(tmp_path / "chromium-profile")
    try:
        where, text, card, links = asyncio.run(
            open_and_read(browser, url, name, "loss/advantage", shot)
        )
    finally:
        browser.close()
    print(f"screenshot of {url}: {shot}")
    seen = f"(screenshot: {shot})"
    assert where == url, f"the UI went elsewhere: {where} {seen}"
    assert name in text, f"run name {name!r} not on the page {seen}"
    # The chart of loss/advantage is drawn: its title, its x axis, its legend.
    assert card is not None, f"no chart of loss/advantage {seen}"
    assert card.startswith("advantage\n") and "\nStep\n" in card, f"chart not drawn {seen}"
    # The page is in the Model training mode: it leads back to the runs table.
    assert f"Runs -> #/experiments/{experiment_id}/runs" in links, f"GenAI mode {seen}"
    assert shot.stat().st_size > 10_000
