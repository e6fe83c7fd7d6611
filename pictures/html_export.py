"""One self-contained HTML file of a page's view: its Plotly figures with plotly.js inside, so a teacher can open
it on any machine, with no server and no network."""

from __future__ import annotations

import html

import plotly.graph_objects as go
import plotly.io as pio


def view_html(title: str, lines: list[str], figures: list[go.Figure]) -> bytes:
    """The page `title`, a few `lines` of plain text (the model, the input, the link), then every figure; plotly.js
    is written once, into the file itself. Each figure's element is named by its place (figure-0, figure-1...), where
    Plotly names it at random: the same view then gives the same bytes, from any server, on any click."""
    parts = [
        pio.to_html(
            figure,
            include_plotlyjs=i == 0,
            full_html=False,
            default_width="100%",
            default_height="620px",
            div_id=f"figure-{i}",
        )
        for i, figure in enumerate(figures)
    ]
    paragraphs = "\n".join(f"<p>{html.escape(line)}</p>" for line in lines)
    page = f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body {{ font-family: "Source Sans Pro", sans-serif; margin: 2em; color: #31333f; }}
p {{ margin: 0.3em 0; }} .figure {{ margin: 1.5em 0; }}</style></head>
<body>
<h1>{html.escape(title)}</h1>
{paragraphs}
{"".join(f'<div class="figure">{part}</div>' for part in parts)}
</body>
</html>
"""
    return page.encode("utf-8")
