"""What a page shows of the hostile course's student text (tests/support/hostile_course.py),
measured in the browser after MathJax typeset it: links, colours, sizes, headings; and every link
of the notebook clicked, as an instructor would.

The measures do not depend on how the page is built: they look at the DOM and at computed
styles, so the same probe reads formgrader's page and the feedback page, before and after a fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tests.support.cdp import Page
from tests.support.hostile_course import COLOUR

SAFE_LINK = ("http:", "https:", "mailto:")
# every script of a probe runs in the page; it returns JSON
INSPECT = r"""
((labels, colour, safe) => {
  const scope = document.querySelector('#notebook-container') || document.body;
  const all = Array.from(scope.querySelectorAll('*'));
  // MathJax shows a `-` in math as a minus sign
  const text = el => (el.textContent || '').replace(/\u2212/g, '-').trim().slice(0, 80);
  const links = Array.from(scope.querySelectorAll('a')).map(a => {
    const raw = a.getAttribute('href') || a.getAttribute('xlink:href') || '';
    let protocol = '';
    try { protocol = new URL(raw, location.href).protocol; } catch (e) { protocol = 'invalid'; }
    return {raw: raw.slice(0, 60), protocol, anchor: raw.startsWith('#'), text: text(a)};
  }).filter(l => l.raw && !l.anchor && !safe.includes(l.protocol));
  const coloured = all.filter(el => {
    const s = getComputedStyle(el);
    return [s.color, s.backgroundColor, s.textShadow, s.borderTopColor, s.outlineColor]
      .some(v => v && v.includes(colour));
  }).map(el => ({tag: el.tagName.toLowerCase(), text: text(el)}));
  const forged = {
    ids: Array.from(document.querySelectorAll('#forged')).map(text),
    reports: document.querySelectorAll('.attn-grade-report').length,
  };
  const view = window.innerWidth;
  // an element wider than the screen that no box of the screen's width scrolls or clips
  const contained = el => {
    for (let up = el.parentElement; up; up = up.parentElement) {
      const s = getComputedStyle(up);
      if (['auto', 'scroll', 'hidden', 'clip'].includes(s.overflowX) && up.clientWidth <= view + 1)
        return true;
    }
    return false;
  };
  const wide = all.filter(el => el.getBoundingClientRect().width > view + 1 && !contained(el))
    .map(el => ({tag: el.tagName.toLowerCase(), cls: String(el.className).slice(0, 40),
                 width: Math.round(el.getBoundingClientRect().width), text: text(el)}));
  const maths = Array.from(scope.querySelectorAll('math, .MathJax_CHTML, .mjx-chtml'));
  const tall = maths.filter(el => el.getBoundingClientRect().height > 300)
    .map(el => ({tag: el.tagName.toLowerCase(), text: text(el),
                 height: Math.round(el.getBoundingClientRect().height)}));
  const base = parseFloat(getComputedStyle(document.body).fontSize);
  const region = el => {
    for (let up = el; up && up !== document.body; up = up.parentElement) {
      const s = getComputedStyle(up);
      const first = up.firstElementChild;
      if (s.borderTopStyle !== 'none' && parseFloat(s.borderTopWidth) >= 1 && first &&
          labels.includes(first.textContent.trim()) && first.getBoundingClientRect().height > 0)
        return first.textContent.trim();
    }
    return null;
  };
  const headings = [];
  const walker = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
  for (let node; (node = walker.nextNode());) {
    const found = node.data.match(/FORGED-[a-z-]+/);
    if (!found) continue;
    const el = node.parentElement;
    headings.push({name: found[0], heading: !!el.closest('h1,h2,h3,h4,h5,h6'),
                   checks: !!el.closest('table.attn-grade-checks'),
                   size: parseFloat(getComputedStyle(el).fontSize) / base,
                   region: region(el)});
  }
  const sizes = [];
  const blocks = 'p, li, td, th, div, pre';
  const sized = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
  for (let node; (node = sized.nextNode());) {
    const found = node.data.match(/SIZE-[a-z-]+/);
    if (!found) continue;
    const block = node.parentElement.closest(blocks) || node.parentElement;
    let width = block.scrollWidth, height = 0, font = 1;
    for (const el of block.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      width = Math.max(width, r.width);
      height = Math.max(height, r.height);
      font = Math.max(font, parseFloat(getComputedStyle(el).fontSize) / base);
    }
    sizes.push({name: found[0], width: Math.round(width), height: Math.round(height),
                font: Math.round(font * 100) / 100});
  }
  return JSON.stringify({links, coloured, forged, wide, tall, headings, sizes,
    width: document.documentElement.scrollWidth, view,
    markers: Array.from(document.querySelectorAll('pwned-marker')).map(m => m.dataset.vector),
    typeset: document.querySelectorAll('.mjx-chtml, .MathJax_CHTML').length,
    mathml: scope.querySelectorAll('math').length});
})
"""
LINKS = (
    "Array.from((document.querySelector('#notebook-container') || document.body)"
    ".querySelectorAll('a'))"
)
# one link clicked as a mouse click would (a javascript: URL runs after the click returns, and
# a second click before it ran would cancel it: one link at a time)
CLICK = """
((i) => {
  const a = LINKS[i];
  a.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true, view: window}));
  return a.getAttribute('href') || a.getAttribute('xlink:href') || '';
})
""".replace("LINKS", LINKS)
MATHJAX_DONE = """
new Promise(done => {
  const wait = () => (window.MathJax && MathJax.Hub && MathJax.isReady)
    ? MathJax.Hub.Queue(() => done(MathJax.version)) : setTimeout(wait, 100);
  wait();
})
"""


@dataclass
class Seen:
    """One look at a page (the INSPECT script's answer)."""

    links: list[dict]
    coloured: list[dict]
    forged: dict
    wide: list[dict]  # elements wider than the screen that stick out of it (not in a scroll box)
    tall: list[dict]
    headings: list[dict]
    sizes: list[dict]  # per SIZE-NAME: the widest and tallest element of its block, largest font
    width: int
    view: int
    markers: list[str]
    typeset: int
    mathml: int


# Our pages load no MathJax (their math is MathML). An instructor's own setup might add it: the
# probe loads MathJax 2.7 as nbconvert's template did (from the CDN, with its configuration:
# `$...$` inline), with a control of its own that it must typeset, so that the measures below
# say what MathJax would make of the page.
ADD_MATHJAX = """
(() => {
  if (window.MathJax) return false;
  const control = document.createElement('p');
  control.id = 'mathjax-control';
  control.textContent = '$x^2$';
  document.body.appendChild(control);
  window.MathJax = {
    tex2jax: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']],
              displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],
              processEscapes: true, processEnvironments: true},
    TeX: {equationNumbers: {autoNumber: 'AMS', useLabelIds: true}},
    displayAlign: 'center', messageStyle: 'none',
    CommonHTML: {linebreaks: {automatic: true}},
  };
  const script = document.createElement('script');
  script.src = 'CDN' + 'latest.js?config=TeX-AMS_CHTML-full,Safe';
  document.head.appendChild(script);
  return true;
})()
"""
CONTROL_TYPESET = "!!document.querySelector('#mathjax-control .MathJax_CHTML')"


def add_mathjax(page: Page, cdn: str) -> bool:
    """Loads MathJax into a page that has none (ADD_MATHJAX); whether it had to."""
    return bool(page.evaluate(ADD_MATHJAX.replace("CDN", cdn)))


def typeset(page: Page) -> str:
    """Waits until MathJax has loaded and typeset the page; its version."""
    return str(page.evaluate(MATHJAX_DONE, timeout=90))


def look(page: Page, labels: list[str]) -> Seen:
    expression = f"{INSPECT}({json.dumps(labels)}, {json.dumps(COLOUR)}, {json.dumps(SAFE_LINK)})"
    return Seen(**json.loads(page.evaluate(expression)))


def click_every_link(page: Page, settle: float = 3.0) -> list[str]:
    """Clicks every link of the notebook (navigations away are aborted and recorded); then
    lets whatever the clicks started finish for `settle` seconds."""
    page.browser.block_navigation = True
    clicked = []
    try:
        for index in range(int(page.evaluate(f"{LINKS}.length"))):
            clicked.append(str(page.evaluate(f"{CLICK}({index})")))
            page.browser.pump(0.3)
        page.browser.pump(settle)
    finally:
        page.browser.block_navigation = False
    return clicked
