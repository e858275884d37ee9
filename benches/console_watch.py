"""The console under load, seen from the browser (`cargo bench --bench load -- console`).

Usage: console_watch.py BASE_URL TEAM_KEY SECONDS

Signs in to the console in Debian's Chromium (Playwright), opens the traffic timeline and
records, for every row the console adds, the time from the message's commit (its
`timestamp`) to the row being in the page; every 10 s the tab's JS heap and the rows it
keeps. Prints `{"ready": true}` once watching, then one JSON line with the figures.
"""

import json
import os
import sys
import time

from playwright.sync_api import sync_playwright

BASE, KEY, SECONDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
CHROMIUM = os.environ.get("SWITCHBOARD_CHROMIUM", "/usr/bin/chromium")

OBSERVE = """() => {
  window.__lat = [];
  const timeline = document.querySelector('#timeline');
  new MutationObserver((muts) => {
    const now = Date.now();
    for (const m of muts) for (const n of m.addedNodes)
      if (n.entry) window.__lat.push(now - Date.parse(n.entry.message.timestamp));
  }).observe(timeline, { childList: true });
}"""

SAMPLE = """() => {
  const lat = window.__lat; window.__lat = [];
  return { lat, heap: performance.memory.usedJSHeapSize,
           rows: document.querySelector('#timeline').children.length,
           nodes: document.getElementsByTagName('*').length };
}"""


def quantile(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--enable-precise-memory-info"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(BASE + "/console")
        page.fill("#credential", KEY)
        page.click("#signin-submit")
        page.wait_for_selector("#app:not([hidden])")
        page.click('nav button[data-view="traffic"]')
        page.evaluate(OBSERVE)
        print(json.dumps({"ready": True}), flush=True)
        latencies, samples = [], []
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            page.wait_for_timeout(10_000)
            s = page.evaluate(SAMPLE)
            latencies.extend(s.pop("lat"))
            samples.append(s)
        browser.close()
    heaps = [s["heap"] for s in samples]
    print(json.dumps({
        "rows_seen": len(latencies),
        "p50_ms": quantile(latencies, 0.5),
        "p99_ms": quantile(latencies, 0.99),
        "max_ms": max(latencies) if latencies else None,
        "heap_first": heaps[0] if heaps else None,
        "heap_last": heaps[-1] if heaps else None,
        "heap_max": max(heaps) if heaps else None,
        "rows_kept_max": max(s["rows"] for s in samples) if samples else None,
        "dom_nodes_max": max(s["nodes"] for s in samples) if samples else None,
        "samples": samples,
    }), flush=True)


if __name__ == "__main__":
    main()
