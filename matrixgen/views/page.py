"""The frame of every page of `matrixgen report`'s site: head, navigation,
stylesheet, and small builders (tables, bar charts, sparklines, tracker links)
that escape what they are given. In the core because the report and the
features that add pages to it (docs/architecture.md, "Features") both build
pages with it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from msgspec import Struct

from matrixgen.util.escape import html_attribute as attr
from matrixgen.util.escape import html_link
from matrixgen.util.escape import html_text as text
from matrixgen.views.cost import hours
from matrixgen.views.table import Column, Report

# A page of the site: (file name, title in the navigation).
PageName = tuple[str, str]

# Nothing may load from anywhere: styles are inline, images are inline SVG.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'"

STYLE = """
:root{--pass:#2e7d32;--fail:#c62828;--skip:#9e9e9e;--rerun:#ef6c00;--muted:#6a1b9a;
--ink:#1d2330;--line:#d7dbe3;--soft:#f3f5f9;--link:#1f5fbf}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);
background:#fff}
header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:baseline;
flex-wrap:wrap}
header b{font-size:16px}
nav a{color:#cfd8e8;margin-right:16px;text-decoration:none}
nav a[aria-current=page]{color:#fff;border-bottom:2px solid #7fb0ff}
main{padding:16px 24px 40px;max-width:1400px}
h1{font-size:22px;margin:8px 0 4px}
h2{font-size:17px;margin:24px 0 6px}
p.note{color:#4a5366;margin:4px 0 12px}
a{color:var(--link)}
table{border-collapse:collapse;margin:6px 0 16px}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.figures{display:flex;gap:16px;flex-wrap:wrap;margin:8px 0 16px}
.figure{border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:140px}
.figure b{display:block;font-size:22px}
.expired{background:#fde4e4}
.expiring{background:#fff3d6}
.tag{display:inline-block;border-radius:3px;padding:0 5px;font-size:12px;font-weight:600}
.tag.expired{color:#8e0000}.tag.expiring{color:#7a4b00}
.sel td{text-align:center;white-space:nowrap}
.sel td.case{text-align:left}
.run{color:var(--pass)}.skip{color:var(--fail)}.allow{color:var(--rerun)}.desel{color:var(--muted)}
.off{color:#b0b6c2}
.grid{font:12px/1 ui-monospace,SFMono-Regular,Menlo,monospace}
.grid td{padding:0;width:14px;height:16px;text-align:center;border:1px solid #fff}
.grid th{font-weight:400;font-size:11px;padding:2px 4px}
.grid th.c{writing-mode:vertical-rl;height:84px;padding:2px 0;vertical-align:bottom}
.grid td.name{max-width:460px;overflow:hidden;text-overflow:ellipsis}
.grid td.k{width:auto;text-align:left;padding:0 6px;white-space:nowrap;
font:12px system-ui,sans-serif}
.grid .p{background:#c8e6c9;color:#1b5e20}.grid .f{background:#ef9a9a;color:#7f0000}
.grid .s{background:#eeeeee;color:#616161}.grid .r{background:#ffe0b2;color:#8a3d00}
.grid .m{background:#e1bee7;color:#4a148c}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:16px;text-align:center;font-style:normal;margin-right:4px}
.verdict-broken,.verdict-failing{color:var(--fail);font-weight:600}.verdict-flaky{color:var(--rerun);font-weight:600}
svg text{font:12px system-ui,sans-serif;fill:var(--ink)}
"""


class Frame(Struct, frozen=True, kw_only=True):
    """What every page of one site shares: the navigation (every page, in its
    order) and the subtitle."""

    nav: tuple[PageName, ...]
    subtitle: str

    def page(self, name: str, title: str, body: str, *, style: str = "") -> str:
        """A whole page: `name` is its file (marked in the navigation); `style`, the
        page's own rules after the shared ones."""
        links = "".join(
            f'<a href="{href}"{" aria-current=page" if href == name else ""}>{label}</a>'
            for href, label in self.nav
        )
        sub = f'<span class="note">{text(self.subtitle)}</span>' if self.subtitle else ""
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="viewport" content="width=device-width,initial-scale=1">\n'
            '<meta name="referrer" content="no-referrer">\n'
            f"<title>{text(title)} · matrixgen</title>\n"
            f"<style>{STYLE}{style}</style></head>\n"
            f"<body><header><b>matrixgen report</b><nav>{links}</nav>{sub}</header>\n"
            f"<main>\n<h1>{text(title)}</h1>\n{body}</main></body></html>\n"
        )


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    numeric: Sequence[int] = (),
    cls: str = "",
    row_classes: Sequence[str] | None = None,
) -> str:
    """A table of cells already escaped (headers are escaped here)."""
    columns = [Column(h, right=i in numeric, html=str) for i, h in enumerate(headers)]
    return Report(columns, list(rows)).html(cls=cls, row_classes=row_classes)


def figures(items: Sequence[tuple[str, str]]) -> str:
    """Big numbers with a caption: (number, caption), both escaped here."""
    return (
        '<div class="figures">'
        + "".join(f'<div class="figure"><b>{text(n)}</b>{text(c)}</div>' for n, c in items)
        + "</div>\n"
    )


def bar_chart(title: str, bars: Sequence[tuple[str, Sequence[tuple[str, float, str]]]]) -> str:
    """Horizontal bars: per label, one bar per (series name, value, colour).
    Values are scaled to the largest; an empty chart says so."""
    top = max((v for _, series in bars for _, v, _ in series), default=0.0)
    if not bars or top <= 0:
        return '<p class="note">Nothing to chart: every value is 0.</p>\n'
    label_width, bar_width, row = 190, 560, 14
    per = max(len(series) for _, series in bars)
    height = len(bars) * (per * row + 10) + 30
    out = [
        f'<svg role="img" aria-label="{attr(title)}" width="{label_width + bar_width + 120}" '
        f'height="{height}" viewBox="0 0 {label_width + bar_width + 120} {height}">',
        f"<title>{text(title)}</title>",
    ]
    y = 6
    for label, series in bars:
        out.append(f'<text x="0" y="{y + per * row // 2 + 4}">{text(label)}</text>')
        for name, value, colour in series:
            width = round(bar_width * value / top, 1)
            out.append(
                f'<rect x="{label_width}" y="{y}" width="{width}" height="{row - 2}" '
                f'fill="{attr(colour)}"><title>{text(f"{label}: {name} {value:,.2f}")}</title>'
                "</rect>"
                f'<text x="{label_width + width + 4}" y="{y + row - 4}">{hours(value)}</text>'
            )
            y += row
        y += 10
    x = label_width
    legend = {name: colour for _, series in bars for name, _, colour in series}
    for name, colour in legend.items():
        out.append(f'<rect x="{x}" y="{y + 4}" width="10" height="10" fill="{attr(colour)}"/>')
        out.append(f'<text x="{x + 14}" y="{y + 13}">{text(name)}</text>')
        x += 14 + 8 * len(name) + 20
    out.append("</svg>")
    return "\n".join(out) + "\n"


# Outcome classes of the flake grid, sparklines and legends: (class, glyph,
# name, colour). The glyph tells them apart without the colour.
OUTCOME_STYLE = {
    "pass": ("p", ".", "pass", "#2e7d32"),
    "fail": ("f", "X", "fail", "#c62828"),
    "skip": ("s", "-", "skip", "#9e9e9e"),
    "rerun": ("r", "R", "rerun-pass", "#ef6c00"),
    "muted": ("m", "M", "muted", "#6a1b9a"),
}


def sparkline(outcomes: Sequence[str], label: str) -> str:
    """A row of small bars, one per run (oldest first): a failure is a tall red
    bar, a pass a short green one, so height tells them apart as well."""
    if not outcomes:
        return '<span class="off">no runs</span>'
    width = 5 * len(outcomes)
    bars = []
    for i, outcome in enumerate(outcomes):
        _, _, name, colour = OUTCOME_STYLE[outcome]
        tall = outcome in ("fail", "muted")
        height = 14 if tall else (5 if outcome == "skip" else 8)
        bars.append(
            f'<rect x="{5 * i}" y="{16 - height}" width="4" height="{height}" fill="{colour}">'
            f"<title>{name}</title></rect>"
        )
    return (
        f'<svg role="img" aria-label="{attr(label)}" width="{width}" height="16" '
        f'viewBox="0 0 {width} 16">' + "".join(bars) + "</svg>"
    )


def tracker_link(url: str | None, written: str) -> str:
    """A tracker as written, linked where it has a safe address."""
    href = html_link(url)
    if href is None:
        return text(written)
    return f'<a href="{href}" rel="noreferrer noopener">{text(written)}</a>'
