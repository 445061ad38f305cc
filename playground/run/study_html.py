"""A study's table as one self-contained HTML page (`playground study table NAME --html FILE`): every cell's row,
its success with its Wilson interval as a chart (the paper's number beside it where the study gives one), and a
chart per keyed figure whose keys are numbers (a curve per cell, e.g. the share solved within each step budget).
Inline CSS and SVG (`playground.run.svg`), as `playground report`: no server, no network, no script.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape

from playground.core.figures import Figure, column_figure, column_key, keyed_columns, shown_value
from playground.core.study_file import Study
from playground.run import svg
from playground.run.html_report import CSS
from playground.run.study import Cell, study_columns, table_rows


def _value(column: str, value: object, figures: Mapping[str, Figure]) -> str:
    """One table cell, as the terminal's table shows it (`shown_value`); an en dash for nothing."""
    if value is None:
        return "–"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return escape(str(value))
    figure = figures.get(column_figure(column))
    return shown_value(column, value, figure is not None and figure.share)


def _label(cell: Cell, one_grid: bool) -> str:
    return cell.harness if one_grid else f"{cell.grid} / {cell.harness}"


def _curves(cells: Sequence[Cell], figure: Figure | None, name: str, columns: list[str], one_grid: bool) -> str:
    """A keyed figure with numeric keys as one line per cell (x: the key), or "" where a key is not a number."""
    try:
        keys = [float(column_key(column)) for column in columns]
    except ValueError:
        return ""
    lines = [(_label(cell, one_grid), [(x, float(value)) for x, column in zip(keys, columns)
                                       if (value := cell.figures.get(column)) is not None], svg.color(i))
             for i, cell in enumerate(cells)]
    share = figure is not None and figure.share
    chart = (svg.line_chart(lines, name, "share", y_format=lambda value: f"{value:.0%}") if share
             else svg.line_chart(lines, name, "value"))
    return (f"<h3>{escape(name)}</h3>" + chart
            + svg.legend([line[0] for line in lines], [line[2] for line in lines]))


def study_html(study: Study, cells: Sequence[Cell], figures: Mapping[str, Figure]) -> str:
    """The page: the study's title and kind, the success chart, the table (every column of `study_table`'s cells)
    and a chart per keyed figure with numeric keys; the plugins' figures described below the table."""
    one_grid = len(study.grids) + len(study.pipelines) == 1
    columns = study_columns(study, cells)
    rows = table_rows(study, list(cells))
    head = "".join(f"<th>{escape(column)}</th>" for column in columns)
    body = "".join("<tr>" + "".join(f"<td>{_value(column, row.get(column), figures)}</td>" for column in columns)
                   + "</tr>" for row in rows)
    success = [(_label(cell, one_grid), cell.success, cell.ci[0], cell.ci[1], svg.color(i))
               for i, cell in enumerate(cells)]
    papers = [(f"{_label(cell, one_grid)} (paper)", cell.paper, None, None, "#999")
              for cell in cells if cell.paper is not None]
    charts = "".join(_curves(cells, figures.get(name), name, keys, one_grid)
                     for name, keys in keyed_columns(columns).items())
    described = {column_figure(c): figures[column_figure(c)] for c in columns if column_figure(c) in figures}
    notes = "".join(f"<li><code>{escape(f.name)}</code>: {escape(f.description)} [plugin {escape(f.plugin)}]</li>"
                    for f in described.values())
    title = f"{study.name}: {study.title}"
    paper = f"; the paper: {escape(study.paper)}" if study.paper else ""
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>"
            f"<p class=\"meta\">{escape(study.kind)} figures{paper}"
            f"; written {escape(time.strftime('%Y-%m-%d %H:%M:%S'))}</p>"
            f"<h2>Success</h2>{svg.interval_bars([*success, *papers], 'success (Wilson 95% interval)')}"
            f"<h2>Table</h2><div class=\"wide\"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            "</div><p class=\"note\">diff and p: the paired difference in success against the grid's reference "
            "harness and its exact McNemar p; steps, invalid, calls, tokens, interventions, lessons: per episode; "
            f"resolved: the share of repair verdicts that judged the repair resolved.</p><ul class=\"note\">{notes}"
            f"</ul>{'<h2>Keyed figures</h2>' + charts if charts else ''}</body></html>\n")
