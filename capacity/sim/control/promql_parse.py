"""PromQL text -> `contract.signals.Query`: the subset the simulator evaluates, nothing more.

Accepted (equality label matchers `{label="value", ...}` are returned beside the Query: the
simulator compares them with the labels its series carry, `parse_selecting`):

    AGG [by (labels)] (metric)                                   AGG: sum, avg, max, min
    AGG [by (labels)] (avg_over_time(metric[d]))   also max_over_time, rate; `by` may follow
    histogram_quantile(q, AGG by (le[, labels]) (rate(metric_bucket[d])))
    (histogram_quantile(...) > 0) or vector(0)
    AGG [by (labels)] (rate(metric[d] offset d))                the forecast triggers' look-ahead:
    predict_linear((AGG [by (labels)] (rate(metric[d])))[d:d], seconds)   a day ago, or a trend

Anything else (another function, a binary operator, offset elsewhere, another subquery, a regex matcher) is a
ValueError naming the construct, so a ScaledObject the simulator cannot read is refused, not
approximated. Durations follow Prometheus' syntax (`1h30m`, `5m`, `90s`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import cast, get_args

from contract.signals import RANGE_FUNCTIONS, Aggregation, Query, Shape, Trend

AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)
_SHAPE_OF: dict[str, Shape] = {function: shape for shape, function in RANGE_FUNCTIONS.items()}
_TOKEN = re.compile(
    r"\s*(?:(?P<duration>(?:\d+(?:ms|[smhdwy]))+)(?!\w)|(?P<number>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_:][\w:]*)|(?P<string>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
    r"|(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){}\[\],:]))"
)
_DURATION = re.compile(r"(?:\d+(?:ms|[smhdwy]))+")
_DURATION_PART = re.compile(r"(\d+)(ms|[smhdwy])")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


@dataclass(frozen=True)
class _Token:
    kind: str  # number, duration, name, string, op, end
    text: str


def _tokens(text: str) -> list[_Token]:
    out, pos, text = [], 0, text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise ValueError(
                f"unsupported PromQL construct {text[pos:].strip()[:20]!r} in {text!r}: not a token of the subset"
            )
        pos = match.end()
        kind = match.lastgroup
        assert kind is not None
        out.append(_Token(kind, match[kind]))
    out.append(_Token("end", ""))
    return out


def duration_seconds(text: str) -> int:
    """A PromQL duration in whole seconds (`5m` -> 300)."""
    seconds = sum(int(n) * _SECONDS[u] for n, u in _DURATION_PART.findall(text))
    if seconds < 1 or seconds != int(seconds):
        raise ValueError(f"unsupported PromQL construct {text!r}: a window must be a whole number of seconds >= 1s")
    return int(seconds)


# A selector's equality matchers, (label, value) in the order written.
Matchers = tuple[tuple[str, str], ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0
        self.selected: list[tuple[str, str]] = []

    @property
    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def unsupported(self, what: str | None = None) -> ValueError:
        construct = what or self.peek.text or "end of query"
        return ValueError(f"unsupported PromQL construct {construct!r} in {self.text!r}: the simulator reads {_SUBSET}")

    def expect(self, text: str) -> None:
        if self.peek.text != text:
            raise self.unsupported()
        self.take()

    def query(self) -> Query:
        query = self.guarded() if self.peek.text == "(" else self.expression()
        if self.peek.kind != "end":
            raise self.unsupported()
        return query

    def guarded(self) -> Query:
        """`(histogram_quantile(...) > 0) or vector(0)`, or a parenthesised expression."""
        self.expect("(")
        inner = self.guarded() if self.peek.text == "(" else self.expression()
        if self.peek.text == ">":
            if inner.shape != "quantile":
                raise self.unsupported(">")
            self.take()
            if self.take().text not in ("0", "0.0"):
                raise self.unsupported(self.tokens[self.i - 1].text)
            self.expect(")")
            for text in ("or", "vector", "(", "0", ")"):
                if self.peek.text != text:
                    raise self.unsupported()
                self.take()
            return Query(
                inner.metric, "quantile", inner.window_seconds, inner.quantile, inner.aggregation, inner.by, True
            )
        self.expect(")")
        return inner

    def expression(self) -> Query:
        name = self.peek.text if self.peek.kind == "name" else None
        if name == "histogram_quantile":
            return self.histogram_quantile()
        if name == "predict_linear":
            return self.predict_linear()
        if name in AGGREGATIONS:
            return self.aggregation()
        if name is not None and self.tokens[self.i + 1].text == "(":
            raise self.unsupported(name)
        if name is not None:
            raise self.unsupported(f"{name} without an aggregation (KEDA needs one series: sum/avg/max/min)")
        raise self.unsupported()

    def grouping(self) -> tuple[str, ...]:
        if self.peek.text == "without":
            raise self.unsupported("without")
        if self.peek.text != "by":
            return ()
        self.take()
        self.expect("(")
        labels = []
        while self.peek.text != ")":
            if self.peek.kind != "name":
                raise self.unsupported()
            labels.append(self.take().text)
            if self.peek.text == ",":
                self.take()
        self.take()
        return tuple(labels)

    def aggregation(self) -> Query:
        aggregation = self.take().text
        by = self.grouping()
        self.expect("(")
        metric, shape, window, offset = self.inner()
        self.expect(")")
        by = by or self.grouping()
        if offset and shape != "sum_rate":
            raise self.unsupported(f"offset inside {RANGE_FUNCTIONS[shape]}")
        return Query(metric, shape, window, aggregation=_aggregation(aggregation), by=by, offset_seconds=offset)

    def predict_linear(self) -> Query:
        """`predict_linear((AGG(rate(metric[d])))[range:step], seconds)`."""
        self.take()
        self.expect("(")
        self.expect("(")
        inner = self.expression()
        self.expect(")")
        if inner.shape != "sum_rate" or inner.offset_seconds:
            raise self.unsupported("predict_linear of anything but a rate's aggregation")
        self.expect("[")
        if self.peek.kind != "duration":
            raise self.unsupported()
        range_s = duration_seconds(self.take().text)
        step_s = self.subquery_step()
        self.expect("]")
        if self.peek.text == "offset":
            raise self.unsupported("offset on a subquery")
        self.expect(",")
        if self.peek.kind != "number":
            raise self.unsupported()
        ahead = float(self.take().text)
        self.expect(")")
        if ahead != int(ahead) or ahead <= 0:
            raise ValueError(f"predict_linear's look-ahead must be whole seconds > 0, got {ahead} in {self.text!r}")
        try:
            trend = Trend(range_s, step_s, int(ahead))
        except ValueError as exc:
            raise ValueError(f"{exc} in {self.text!r}") from None
        return replace(inner, trend=trend)

    def subquery_step(self) -> int:
        """`:step` after a subquery's range: the tokenizer reads `:60s` as a name (metric names
        may hold colons), or `:` then a duration."""
        token = self.take()
        text = token.text
        if text == ":" and self.peek.kind == "duration":
            text += self.take().text
        if not (text.startswith(":") and _DURATION.fullmatch(text[1:])):
            raise self.unsupported(f"{text} (a subquery needs a step, [range:step])")
        return duration_seconds(text[1:])

    def inner(self) -> tuple[str, Shape, int | None, int]:
        """A selector, or a range function over a range selector (and its offset)."""
        if self.peek.kind != "name":
            raise self.unsupported()
        name = self.take().text
        if self.peek.text == "(":
            if name not in _SHAPE_OF:
                raise self.unsupported(name)
            self.take()
            metric, window, offset = self.range_selector()
            self.expect(")")
            return metric, _SHAPE_OF[name], window, offset
        if name in AGGREGATIONS:
            raise self.unsupported(f"nested {name}")
        self.matchers()
        if self.peek.text == "[":
            raise self.unsupported("a range selector without a range function")
        if self.peek.text == "offset":
            raise self.unsupported("offset")
        return name, "sum", None, 0

    def range_selector(self) -> tuple[str, int, int]:
        if self.peek.kind != "name":
            raise self.unsupported()
        metric = self.take().text
        self.matchers()
        self.expect("[")
        if self.peek.kind != "duration":
            raise self.unsupported()
        window = duration_seconds(self.take().text)
        if self.peek.text.startswith(":"):
            raise self.unsupported("subquery")
        self.expect("]")
        offset = 0
        if self.peek.text == "offset":
            self.take()
            if self.peek.kind != "duration":
                raise self.unsupported("offset")
            offset = duration_seconds(self.take().text)
        return metric, window, offset

    def matchers(self) -> None:
        if self.peek.text != "{":
            return
        self.take()
        while self.peek.text != "}":
            if self.peek.kind != "name":
                raise self.unsupported()
            label = self.take().text
            op = self.take().text
            if op != "=":
                raise self.unsupported(f"{label}{op}")
            value = self.take()
            if value.kind != "string":
                raise self.unsupported()
            self.selected.append((label, _unquote(value.text)))
            if self.peek.text == ",":
                self.take()
        self.take()

    def histogram_quantile(self) -> Query:
        self.take()
        self.expect("(")
        if self.peek.kind != "number":
            raise self.unsupported()
        q = float(self.take().text)
        self.expect(",")
        if self.peek.text not in AGGREGATIONS:
            raise self.unsupported()
        aggregation = self.take().text
        by = self.grouping()
        self.expect("(")
        if self.peek.text != "rate":
            raise self.unsupported()
        self.take()
        self.expect("(")
        bucket, window, offset = self.range_selector()
        if offset:
            raise self.unsupported("offset inside histogram_quantile")
        self.expect(")")
        self.expect(")")
        by = by or self.grouping()
        self.expect(")")
        if "le" not in by:
            raise self.unsupported(f"{aggregation} without by (le) inside histogram_quantile")
        if not bucket.endswith("_bucket"):
            raise self.unsupported(f"histogram_quantile over {bucket} (not a _bucket series)")
        if not 0 < q < 1:
            raise ValueError(f"histogram_quantile's quantile must be in (0, 1), got {q} in {self.text!r}")
        extra = tuple(label for label in by if label != "le")
        return Query(bucket.removesuffix("_bucket"), "quantile", window, q, _aggregation(aggregation), extra, False)


_SUBSET = (
    "sum/avg/max/min [by (...)] of a metric, of avg_over_time/max_over_time/rate(metric[d]), or "
    "histogram_quantile(q, AGG by (le) (rate(metric_bucket[d]))) [> 0 or vector(0)], "
    "AGG(rate(metric[d] offset d)) or predict_linear((AGG(rate(metric[d])))[d:d], seconds)"
)


def parse(text: str) -> Query:
    """The Query a PromQL string within the subset describes; a ValueError naming what is not."""
    return parse_selecting(text)[0]


def parse_selecting(text: str) -> tuple[Query, Matchers]:
    """The Query and its selector's label matchers (the subset has one selector per query)."""
    parser = _Parser(text)
    query = parser.query()
    return query, tuple(parser.selected)


def _unquote(text: str) -> str:
    """A PromQL string literal's value (double or single quotes, backslash escapes)."""
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _aggregation(text: str) -> Aggregation:
    """A token the parser took from AGGREGATIONS, as the Query's literal type."""
    for name in get_args(Aggregation):
        if text == name:
            return cast(Aggregation, name)
    raise ValueError(f"{text!r} is not an aggregation the simulator evaluates ({', '.join(AGGREGATIONS)})")
