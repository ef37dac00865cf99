"""What a test reads of an HTML report, parsed with html.parser: images, table headers and cells, all text."""

from html.parser import HTMLParser
from pathlib import Path


class Report(HTMLParser):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self.images: list[str] = []
        self.headers: list[str] = []
        self.cells: list[str] = []
        self.text: list[str] = []
        self._in_cell: str | None = None
        self.feed(path.read_text())
        self.close()

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        self._in_cell = tag if tag in ("td", "th") else None

    def handle_endtag(self, tag):
        self._in_cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in_cell:
            (self.cells if self._in_cell == "td" else self.headers).append(data)


def embeds(report: Report, png: Path) -> bool:
    import base64

    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode() in report.images
