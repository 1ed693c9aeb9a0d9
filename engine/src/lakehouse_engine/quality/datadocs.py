"""Data Docs that read offline: GX's pages without their CDN scripts, stylesheets and images.

Great Expectations writes pages that load jQuery, Bootstrap, bootstrap-table, Vega and Font
Awesome from CDNs, and the index page's tables are *built* by bootstrap-table from data inside
an inline script: offline, or behind a proxy, the index is empty. ``make_offline`` rewrites each
page once after GX built it:

- every bootstrap-table script becomes the static ``<table>`` it would have drawn (rows sorted
  as the table asked, each row linked to its page);
- every other script, every external stylesheet, the tracking logo and GX's newsletter footer go; the logo is the copy
  GX ships in ``static/images``; a small inline stylesheet lays the page out instead;
- ``url(https://...)`` in inline and shipped CSS is dropped.

Nothing the pages show depends on a script afterwards; a page already rewritten is left alone
(GX rebuilds only the pages of a run), so the pass is cheap and idempotent.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "external_references", "make_offline"]

MARKER = "<!-- offline: rewritten for reading without network -->"

_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>\s*", re.S | re.I)
_EXTERNAL_LINK = re.compile(r"<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>\s*", re.I)
_EXTERNAL_IMG = re.compile(r"(<img\b[^>]*?\bsrc\s*=\s*)([\"'])(?:https?:)?//[^\"']*\2", re.I | re.S)
_EXTERNAL_URL = re.compile(r"url\(\s*([\"']?)(?:https?:)?//[^)]*\1\s*\)", re.I)
_CLEAR_FILTERS = re.compile(r"<button\b[^>]*clearTableFilters[^>]*>.*?</button>\s*", re.S | re.I)
# GX's call-to-action footers (a newsletter form, a cloud sign-up): not about the data.
_CTA_FOOTER = re.compile(r"<footer\b(?:(?!</footer>).)*?(?:ge-cta-footer|newsletter).*?</footer>\s*", re.S | re.I)
_BOOTSTRAP_TABLE = re.compile(
    r"\$\('#(?P<id>[\w-]+)'\)\.bootstrapTable\(\s*Object\.assign\(\s*\{\s*"
    r"columns:\s*(?P<columns>\[.*?\]),\s*data:\s*(?P<data>\[.*?\]),\s*toolbar:[^\n]*\n\s*\},\s*"
    r"(?P<options>\{.*?\})\s*\)\s*\);",
    re.S,
)
# Resources a browser would fetch by itself: scripts, stylesheets, images, frames, CSS url().
_RESOURCE = re.compile(
    r"<(?:script|img|iframe|embed|source|video|audio)\b[^>]*\bsrc\s*=\s*[\"']?((?:https?:)?//[^\"'\s>]+)"
    r"|<link\b[^>]*\bhref\s*=\s*[\"']?((?:https?:)?//[^\"'\s>]+)"
    r"|url\(\s*[\"']?((?:https?:)?//[^\"')]+)",
    re.I,
)

OFFLINE_CSS = """
body { font-family: system-ui, sans-serif; margin: 0; color: #212529; }
a { color: #0b5cad; }
.navbar { display: flex; align-items: center; padding: 0 1rem; border-bottom: 1px solid #dee2e6; }
.container-fluid { padding: 1rem 2rem; }
.row { display: flex; flex-wrap: wrap; gap: 1.5rem; }
.row > [class*="col-md-2"] { flex: 0 0 14rem; }
.row > [class*="col-md-10"] { flex: 1 1 40rem; min-width: 0; }
.card { border: 1px solid #dee2e6; border-radius: 4px; margin-bottom: 1rem; padding: .5rem 1rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #dee2e6; padding: .3rem .6rem; text-align: left; vertical-align: top; }
thead th { background: #f1f3f5; }
.text-success, .ge-success-icon { color: #198754; }
.text-danger, .ge-failed-icon { color: #c62828; }
.cooltip > .top, .cooltip > .bottom, .modal, .invisible, .d-none, .sr-only { display: none; }
.fas.fa-check-circle::before { content: "\\2714"; }
.fas.fa-times::before, .fas.fa-times-circle::before { content: "\\2718"; }
.fas.fa-exclamation-triangle::before { content: "\\26a0"; }
.fas.fa-question-circle::before { content: "?"; }
pre { white-space: pre-wrap; }
"""


def make_offline(site_dir: Path) -> list[Path]:
    """Rewrite every HTML page under ``site_dir`` not rewritten yet; returns the pages rewritten."""
    rewritten: list[Path] = []
    if not site_dir.is_dir():
        return rewritten
    for css in (site_dir / "static" / "styles").glob("*.css"):
        text = css.read_text(encoding="utf-8")
        if _EXTERNAL_URL.search(text):
            css.write_text(_EXTERNAL_URL.sub("none", text), encoding="utf-8")
    for page in sorted(site_dir.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        if MARKER in text:
            continue
        logo = Path("static/images/logo-long.png")
        depth = len(page.relative_to(site_dir).parts) - 1
        page.write_text(offline_page(text, "../" * depth + logo.as_posix()), encoding="utf-8")
        rewritten.append(page)
    return rewritten


def offline_page(text: str, logo_src: str) -> str:
    """One page without anything fetched from the network (see the module's docstring)."""
    tables = {m.group("id"): _static_rows(m) for m in _BOOTSTRAP_TABLE.finditer(text)}
    for table_id, rows in tables.items():
        text = _filled(text, table_id, rows)
    text = _SCRIPT.sub("", text)
    text = _EXTERNAL_LINK.sub("", text)
    text = _EXTERNAL_IMG.sub(lambda m: f"{m.group(1)}{m.group(2)}{logo_src}{m.group(2)}", text)
    text = _EXTERNAL_URL.sub("none", text)
    text = _CLEAR_FILTERS.sub("", text)
    text = _CTA_FOOTER.sub("", text)
    head = f"{MARKER}\n<style>{OFFLINE_CSS}</style>\n"
    if "</head>" in text:
        return text.replace("</head>", head + "</head>", 1)
    return head + text


def external_references(text: str) -> list[str]:
    """Addresses of the network resources ``text`` (HTML or CSS) would make a browser fetch."""
    return [next(g for g in m.groups() if g) for m in _RESOURCE.finditer(text)]


def _filled(text: str, table_id: str, rows: str) -> str:
    """``text`` with the empty ``<table id=table_id>`` holding ``rows``."""
    empty = re.compile(r"(<table\b[^>]*\bid=\"" + re.escape(table_id) + r"\"[^>]*>)\s*</table>", re.S)
    match = empty.search(text)
    if match is None:
        return text
    return text[: match.start()] + match.group(1) + rows + "</table>" + text[match.end() :]


def _static_rows(match: re.Match[str]) -> str:
    """The ``<thead>``/``<tbody>`` a bootstrap-table call would have drawn.

    GX writes the columns, rows and options as Python literals (``str()`` of lists of dicts);
    cell values are HTML that GX rendered (and escaped) itself, so they are kept as they are."""
    columns: Sequence[Mapping[str, Any]] = ast.literal_eval(match.group("columns"))
    data: Sequence[Mapping[str, Any]] = ast.literal_eval(match.group("data"))
    options: Mapping[str, Any] = ast.literal_eval(match.group("options"))
    rows = sorted(data, key=_sort_key(columns, options), reverse=options.get("sortOrder") == "desc")
    head = "".join(f"<th>{html.escape(str(c.get('title', c.get('field', ''))))}</th>" for c in columns)
    return f"<thead><tr>{head}</tr></thead><tbody>{''.join(_row(columns, r) for r in rows)}</tbody>"


def _sort_key(columns: Sequence[Mapping[str, Any]],
              options: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], tuple[int, Any]]:
    field = options.get("sortName")
    by = next((c.get("sortName", field) for c in columns if c.get("field") == field), field)

    def key(row: Mapping[str, Any]) -> tuple[int, Any]:
        value = row.get(by) if by else None
        return (0, value) if isinstance(value, int | float) else (1, str(value or ""))

    return key


def _row(columns: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> str:
    link = row.get("_table_row_link_path")
    cells = []
    for index, column in enumerate(columns):
        value = str(row.get(column.get("field", ""), ""))
        if column.get("field") == "validation_success" and "_validation_success_text" in row:
            value += html.escape(str(row["_validation_success_text"]))  # the icon's meaning, as text
        if link and index == 0:
            value = f'<a href="{html.escape(str(link), quote=True)}">{value or "open"}</a>'
        cells.append(f"<td>{value}</td>")
    return f"<tr>{''.join(cells)}</tr>"
