"""Just enough PromQL structure to answer two questions about a KEDA query:
does it return at most one series, and which vLLM metric names does it read.

KEDA's Prometheus scaler fails a trigger when the query returns more than one series,
so the answer must be decided from the expression's shape (the outermost aggregation),
not from a live Prometheus. Anything this reader does not recognise counts as
"may return many series": the policy errs towards asking for an explicit `sum`.
"""

from __future__ import annotations

import re

_AGGREGATIONS = {"sum", "min", "max", "avg", "count", "group", "stddev", "stdvar"}
# Functions whose result has the series of their first (vector) argument.
_PASS_THROUGH = {
    "abs",
    "ceil",
    "floor",
    "round",
    "clamp",
    "clamp_min",
    "clamp_max",
    "exp",
    "ln",
    "log2",
    "log10",
    "sqrt",
}
_SINGLE = {"vector", "scalar", "absent", "time"}
# Functions of a range vector whose result has its series: over a subquery, `(expr)[range:step]`,
# the series of `expr` (a forecast trigger's `predict_linear((sum(...))[10m:1m], 300)`).
_OVER_RANGE = {
    "predict_linear",
    "deriv",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "sum_over_time",
    "last_over_time",
}
_SUBQUERY = re.compile(r"^(\(.*\))\s*\[[^\[\]:]+:[^\[\]]*\](\s*offset\s+-?\w+)?$", re.DOTALL)
_GROUPING = re.compile(r"^(by|without)\s*\(([^()]*)\)\s*", re.IGNORECASE)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
# Binary operators from the lowest precedence to the highest.
_PRECEDENCE: list[tuple[str, ...]] = [
    ("or",),
    ("and", "unless"),
    ("==", "!=", ">=", "<=", ">", "<"),
    ("+", "-"),
    ("*", "/", "%"),
    ("^",),
]
_VLLM_METRIC = re.compile(r"vllm:[A-Za-z0-9_:]+")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


def _blank_strings(expr: str) -> str:
    """Replace quoted label values by same-length placeholders so they cannot confuse the scan."""
    return _STRING.sub(lambda m: '"' + "_" * (len(m.group(0)) - 2) + '"', expr)


def _depths(expr: str) -> list[int]:
    """Bracket depth ((), {}, []) at each character."""
    depth, out = 0, []
    for ch in expr:
        if ch in "({[":
            out.append(depth)
            depth += 1
        elif ch in ")}]":
            depth -= 1
            out.append(depth)
        else:
            out.append(depth)
    return out


def _matching_paren(expr: str, start: int) -> int:
    depth = 0
    for i in range(start, len(expr)):
        if expr[i] in "({[":
            depth += 1
        elif expr[i] in ")}]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_binary(expr: str) -> tuple[str, str] | None:
    """Split at the lowest-precedence top-level binary operator (rightmost, as PromQL is left-associative)."""
    depths = _depths(expr)
    for operators in _PRECEDENCE:
        found = None
        i = 0
        while i < len(expr):
            if depths[i] == 0:
                for op in operators:
                    if op.isalpha():
                        match = re.match(rf"\s{op}\s", expr[i - 1 : i + len(op) + 1]) if i > 0 else None
                        if match:
                            found = (i, len(op))
                    elif expr.startswith(op, i):
                        before = expr[:i].rstrip()
                        # A leading sign or an exponent is not a binary operator.
                        if op in "+-" and (
                            not before
                            or before[-1] in "(,=<>!*/%^+-"
                            or (before[-1] in "eE" and _NUMBER.match(before.split()[-1] + "0"))
                        ):
                            continue
                        if op in ("<", ">") and expr.startswith("=", i + 1):
                            continue
                        if op == "=" or (op in ("<", ">") and i > 0 and expr[i - 1] in "!=<>"):
                            continue
                        found = (i, len(op))
                        i += len(op) - 1
                        break
            i += 1
        if found:
            at, width = found
            left, right = expr[:at], expr[at + width :]
            # `> bool`, `on(...)`, `ignoring(...)`, `group_left` modifiers belong to the operator.
            right = re.sub(
                r"^\s*(bool\b)?\s*((on|ignoring)\s*\([^()]*\))?\s*((group_left|group_right)\s*(\([^()]*\))?)?",
                "",
                right,
            )
            return left.strip(), right.strip()
    return None


def _call(expr: str) -> tuple[str, list[str], list[str] | None] | None:
    """`name [by|without (labels)] (args) [by|without (labels)]` -> (name, args, grouping).
    Grouping is None without a clause, the label list for `by`, ["*"] for `without`."""
    ident = _IDENT.match(expr)
    if not ident:
        return None
    name, rest = ident.group(0), expr[ident.end() :].lstrip()
    grouping: list[str] | None = None
    clause = _GROUPING.match(rest)
    if clause:
        grouping = _labels(clause)
        rest = rest[clause.end() :]
    if not rest.startswith("("):
        return None
    close = _matching_paren(rest, 0)
    if close < 0:
        return None
    inner, tail = rest[1:close], rest[close + 1 :].strip()
    if tail:
        clause = _GROUPING.match(tail)
        if not clause or tail[clause.end() :].strip():
            return None
        grouping = _labels(clause)
    return name.lower(), _split_args(inner), grouping


def _labels(clause: re.Match[str]) -> list[str]:
    if clause.group(1).lower() == "without":
        return ["*"]
    return [label.strip() for label in clause.group(2).split(",") if label.strip()]


def _split_args(inner: str) -> list[str]:
    depths, parts, start = _depths(inner), [], 0
    for i, ch in enumerate(inner):
        if ch == "," and depths[i] == 0:
            parts.append(inner[start:i].strip())
            start = i + 1
    parts.append(inner[start:].strip())
    return [p for p in parts if p]


def _strip_parens(expr: str) -> str:
    expr = expr.strip()
    while expr.startswith("(") and _matching_paren(expr, 0) == len(expr) - 1:
        expr = expr[1:-1].strip()
    return expr


def _series_labels(expr: str) -> set[str] | None:
    """The label names that may vary across the result's series: an empty set means
    one series at most; None means unbounded (a bare selector, `rate(...)`, unknown shapes)."""
    expr = _strip_parens(expr)
    if not expr or _NUMBER.match(expr):
        return set()
    if expr[0] in "+-" and not _split_binary(expr):
        return _series_labels(expr[1:])  # a unary sign keeps the operand's series
    binary = _split_binary(expr)
    if binary:
        left, right = (_series_labels(side) for side in binary)
        if left is None or right is None:
            return None
        return left | right
    call = _call(expr)
    if call is None:
        return None
    name, args, grouping = call
    if name in _SINGLE:
        return set()
    if name in _AGGREGATIONS:
        if grouping is None:
            return set()
        return None if "*" in grouping else set(grouping)
    if name == "histogram_quantile" and len(args) == 2:
        buckets = _series_labels(args[1])
        if buckets is None:
            return None
        # The quantile folds the `le` buckets into one value per remaining label set.
        return buckets - {"le"}
    if name in _PASS_THROUGH and args:
        return _series_labels(args[0])
    if name in _OVER_RANGE and args and (subquery := _SUBQUERY.match(args[0])):
        return _series_labels(subquery.group(1))
    return None


def returns_single_series(query: str) -> bool:
    """True when the query provably returns at most one series."""
    return _series_labels(_blank_strings(query)) == set()


def vllm_metric_names(query: str) -> set[str]:
    """Every `vllm:` metric name the query reads (label values are ignored)."""
    return set(_VLLM_METRIC.findall(_blank_strings(query)))


def uses_quantile(query: str) -> bool:
    """Latency quantiles are not additive across replicas (KEDA must not average them)."""
    return bool(re.search(r"\b(histogram_quantile|quantile|quantile_over_time)\s*\(", _blank_strings(query)))


# A range `[d]`, or a subquery's `[d:step]`, and the offset that may follow it.
_RANGE = re.compile(r"\[\s*(\w+)\s*(:\s*\w*\s*)?\](?:\s*offset\s+(\w+))?")
_DURATION_PART = re.compile(r"(\d+)(ms|[smhdwy])")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_seconds(text: str) -> float:
    """A Prometheus duration (`15d`, `1h30m`, `86100s`) in seconds; ValueError when it is not one."""
    if not re.fullmatch(r"(\d+(ms|[smhdwy]))+", text.strip()):
        raise ValueError(f"{text!r} is not a Prometheus duration")
    return float(sum(int(n) * _SECONDS[unit] for n, unit in _DURATION_PART.findall(text)))


def look_back_seconds(query: str) -> float:
    """How far before the evaluation time the query reads samples: over every range selector, its
    range plus its offset plus those of the subqueries around it (`predict_linear((sum(rate(
    m[1m])))[10m:1m], 300)` reads 11 minutes back; `rate(m[5m] offset 1d)` a day and 5 minutes)."""
    text = _blank_strings(query)
    depths = _depths(text)
    subqueries: list[tuple[int, int, float]] = []  # (open paren, close paren, reach) of each subquery
    selectors: list[tuple[int, float]] = []  # (position, reach) of each range selector
    for match in _RANGE.finditer(text):
        reach = duration_seconds(match.group(1)) + (duration_seconds(match.group(3)) if match.group(3) else 0.0)
        close = len(text[: match.start()].rstrip()) - 1
        if match.group(2) is not None and close >= 0 and text[close] == ")":
            # Its opening paren: the last bracket before it opened at the same depth.
            opened = max(i for i in range(close) if text[i] in "({[" and depths[i] == depths[close])
            subqueries.append((opened, close, reach))
        else:
            selectors.append((match.start(), reach))
    reaches = [reach + sum(r for lo, hi, r in subqueries if lo < at < hi) for at, reach in selectors]
    return max(reaches, default=0.0)
