"""One self-contained HTML page per run (`simulate`, `compare`, `plan`): the title, notes, tables
and PNGs embedded as data URIs, each with its caption, so a run is shared as a single file."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1300px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; }
td { text-align: right; } td:first-child { text-align: left; }
th { background: #f3f3f3; }
figure { margin: 1.5em 0; } img { max-width: 100%; }
figcaption, caption, .note { color: #555; font-size: 0.9em; }
caption { caption-side: bottom; text-align: left; padding-top: 0.4em; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }
.warning { color: #b00; border: 2px solid #b00; padding: 0.5em; font-weight: bold; }
"""


@dataclass(frozen=True)
class HtmlTable:
    title: str
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str = ""


@dataclass(frozen=True)
class HtmlFigure:
    png: Path
    caption: str = ""


def _table(table: HtmlTable) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>\n" for row in table.rows)
    caption = f"<caption>{escape(table.caption)}</caption>" if table.caption else ""
    return f"<h2>{escape(table.title)}</h2>\n<table>{caption}<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody></table>"


def _figure(figure: HtmlFigure) -> str:
    data = base64.b64encode(figure.png.read_bytes()).decode("ascii")
    caption = f"<figcaption>{escape(figure.caption)}</figcaption>" if figure.caption else ""
    return f'<figure><img alt="{escape(figure.png.name)}" src="data:image/png;base64,{data}">{caption}</figure>'


def write_html(
    path: Path,
    title: str,
    notes: Sequence[str] = (),
    tables: Sequence[HtmlTable] = (),
    figures: Sequence[HtmlFigure] = (),
    commands: Sequence[str] = (),
    warning: str | None = None,
) -> Path:
    """The page at `path`: notes, then the tables, any commands (as a code block, under `warning`
    in red when they must not be applied as they are), the figures."""
    parts = [f"<h1>{escape(title)}</h1>", *(f'<p class="note">{escape(n)}</p>' for n in notes)]
    parts += [_table(t) for t in tables]
    if warning:
        parts.append(f'<p class="warning">{escape(warning)}</p>')
    if commands:
        parts.append("<pre>" + escape("\n".join(commands)) + "</pre>")
    parts += [_figure(f) for f in figures]
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
