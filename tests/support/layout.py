"""Layout checks of a rendered page in a real browser, by bounding boxes (tests/test_leaderboard_readable.py).

`layout(page)` measures every piece of visible text (each text node's line boxes, an SVG <text> element's box), cut
to what the boxes that clip it (overflow other than visible) let show, and reports:
- `overlaps`: pairs of text pieces of different nodes drawn over each other (more than 1 px both ways). Text hidden
  under a sticky table cell (an opaque cell the table scrolls beneath, as the board's model and average columns) is
  left out of the pairs, and `transparent_sticky` lists sticky cells that would let it show through;
- `spills`: text of a table cell that reaches outside its cell's box (a badge over the next column's score);
- `page`, `view`: the page's scroll width and the window's inner width (sideways scroll when page > view).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

_LAYOUT = r"""(() => {
  const styles = new Map();
  const style = el => { if (!styles.has(el)) styles.set(el, getComputedStyle(el)); return styles.get(el); };
  const clip = (el, r) => {
    const b = {l: r.left, t: r.top, r: r.right, b: r.bottom};
    for (let a = el; a && a !== document.body; a = a.parentElement) {
      const s = style(a);
      if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
      const c = a.getBoundingClientRect();
      if (s.overflowX !== 'visible') { b.l = Math.max(b.l, c.left); b.r = Math.min(b.r, c.right); }
      if (s.overflowY !== 'visible') { b.t = Math.max(b.t, c.top); b.b = Math.min(b.b, c.bottom); }
    }
    return b;
  };
  const sticky = Array.from(document.querySelectorAll('td, th')).filter(c => style(c).position === 'sticky' &&
    c.getClientRects().length);
  const transparent = sticky.filter(c => style(c).backgroundColor.replace(/\s/g, '') === 'rgba(0,0,0,0)')
    .map(c => c.className + ': ' + c.textContent.trim().slice(0, 30));
  const boxes = sticky.map(c => ({cell: c, table: c.closest('table'), r: c.getBoundingClientRect()}));
  const pieces = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(), id = 0; n; n = walker.nextNode(), id++) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || ['SCRIPT', 'STYLE', 'TITLE', 'OPTION', 'TEXTAREA'].includes(el.tagName)) {
      continue;
    }
    // not drawn: inside a closed <details> (its content keeps stale boxes), hidden, transparent
    if (el.checkVisibility && !el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})) continue;
    const svg = el.closest('svg');
    let rects;
    if (svg) rects = [el.getBoundingClientRect()];
    else {
      const range = document.createRange();
      range.selectNodeContents(n);
      rects = Array.from(range.getClientRects());
    }
    const cell = el.closest('td, th');
    const isSticky = cell && style(cell).position === 'sticky';
    for (const r of rects) {
      const b = clip(el, r);
      if (b.r - b.l <= 1 || b.b - b.t <= 1) continue;  // clipped away, or an empty box
      // under a sticky cell of its own table (not its own cell): hidden beneath it, as the table scrolls
      const hidden = !isSticky && boxes.some(s => s.cell !== cell && s.table === el.closest('table') &&
        Math.min(b.r, s.r.right) - Math.max(b.l, s.r.left) > 1 &&
        Math.min(b.b, s.r.bottom) - Math.max(b.t, s.r.top) > 1);
      if (hidden) continue;
      pieces.push({id, b, el, cell, text: n.textContent.trim().slice(0, 40)});
    }
  }
  const where = p => (p.cell ? p.cell.tagName + '.' + (p.cell.className || '') + ' ' : '') + JSON.stringify(p.text) +
    ' @' + [p.b.l, p.b.t, p.b.r, p.b.b].map(Math.round).join(',');
  const sorted = pieces.slice().sort((a, b) => a.b.t - b.b.t);
  const overlaps = [];
  for (let i = 0; i < sorted.length; i++) {
    const a = sorted[i];
    for (let j = i + 1; j < sorted.length && sorted[j].b.t < a.b.b - 1; j++) {
      const b = sorted[j];
      if (a.id === b.id) continue;
      const w = Math.min(a.b.r, b.b.r) - Math.max(a.b.l, b.b.l), h = Math.min(a.b.b, b.b.b) - Math.max(a.b.t, b.b.t);
      if (w > 1 && h > 1) overlaps.push(where(a) + '  x  ' + where(b));
    }
  }
  const spills = [];
  for (const p of pieces) {
    if (!p.cell) continue;
    const c = p.cell.getBoundingClientRect();
    if (p.b.l < c.left - 1 || p.b.r > c.right + 1 || p.b.t < c.top - 1 || p.b.b > c.bottom + 1) {
      spills.push(where(p) + ' outside ' + [c.left, c.top, c.right, c.bottom].map(Math.round).join(','));
    }
  }
  return {pieces: pieces.length, overlaps: overlaps.slice(0, 20), n_overlaps: overlaps.length,
          spills: spills.slice(0, 20), n_spills: spills.length, transparent_sticky: transparent.slice(0, 5),
          page: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth), view: window.innerWidth};
})()"""


def layout(page: Any) -> dict[str, Any]:
    """The layout report of the page loaded in `page` (a test_leaderboard_browser.Page), as the module says."""
    return page.js(_LAYOUT)


def assert_readable(page: Any, width: int, what: str) -> dict[str, Any]:
    """No text drawn over other text, none out of its cell, no sideways scroll of the page at `width` px."""
    got = layout(page)
    assert got["pieces"] > 0, what
    assert got["view"] == width and got["page"] <= width, (what, got["page"], got["view"])
    assert got["n_overlaps"] == 0, (what, got["n_overlaps"], got["overlaps"])
    assert got["n_spills"] == 0, (what, got["n_spills"], got["spills"])
    assert got["transparent_sticky"] == [], (what, got["transparent_sticky"])
    return got


def set_width(page: Any, width: int) -> None:
    """A window `width` px wide; under 500 px a phone's (the page's viewport meta applies, as on a phone)."""
    page.send("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=width < 500)


def screenshot(page: Any, name: str, folder: Path, max_height: int = 4000) -> Path:
    """The page (its first `max_height` px) as a PNG under $VBENCH_SCREENSHOT_DIR, else `folder` (the test's
    temporary folder)."""
    size = page.js("({w: window.innerWidth, h: document.documentElement.scrollHeight})")
    clip = {"x": 0, "y": 0, "width": size["w"], "height": min(size["h"], max_height), "scale": 1}
    shot = base64.b64decode(page.send("Page.captureScreenshot", format="png", clip=clip,
                                      captureBeyondViewport=True)["data"])
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    out = Path(os.environ.get("VBENCH_SCREENSHOT_DIR", folder))
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_bytes(shot)
    return out / name
