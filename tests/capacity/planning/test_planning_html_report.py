"""The HTML report: one self-contained page a run is shared as."""

from pathlib import Path

from capacity.planning.html_report import HtmlFigure, HtmlTable, write_html
from tests.html_page import Report, embeds

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16  # the bytes need only round-trip


def page(tmp_path: Path, **kwargs) -> Report:
    png = tmp_path / "t.png"
    png.write_bytes(PNG)
    table = HtmlTable("summary", ["policy", "SLO attained"], [["stack <prod>", "98.0%"]], "what the columns mean")
    path = write_html(tmp_path / "r.html", "a & b", tables=[table], figures=[HtmlFigure(png, "the caption")], **kwargs)
    return Report(path)


def test_each_png_is_embedded_as_a_data_uri(tmp_path):
    report = page(tmp_path)
    assert len(report.images) == 1 and embeds(report, tmp_path / "t.png")


def test_the_table_cells_and_the_title_are_escaped_text(tmp_path):
    p = page(tmp_path)
    assert (p.headers, p.cells) == (["policy", "SLO attained"], ["stack <prod>", "98.0%"])
    assert "a & b" in p.text


def test_captions_notes_and_commands_are_on_the_page(tmp_path):
    text = "".join(page(tmp_path, notes=["starts from 8"], commands=["pulumi config set x 1"]).text)
    for part in ("what the columns mean", "the caption", "starts from 8", "pulumi config set x 1"):
        assert part in text
