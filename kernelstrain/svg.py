"""Inline SVG charts as strings: histograms, stacked shares, log-scale box plots and
quantile bands. Every chart is `<svg class="chart" data-chart=NAME>` and every data mark
has class "mark" (the browser test counts them)."""
from __future__ import annotations

import math
from html import escape

FONT = 'font-family="system-ui, sans-serif" font-size="11"'
COLORS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
          "#9c755f", "#bab0ac")


def _fmt(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def _svg(name: str, width: int, height: int, body: list[str], title: str) -> str:
    return (f'<svg class="chart" data-chart="{escape(name)}" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" {FONT}><title>{escape(title)}</title>' + "".join(body) + "</svg>")


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `top`: nice_ticks(87) -> [0, 20, 40, 60, 80, 100]."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [round(i * step, 10) for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def log_ticks(lo: float, hi: float, decades_125: float = 2.3) -> list[float]:
    """1-2-5 ticks from the last one <= lo to the first one >= hi: log_ticks(0.9, 30) -> [0.5, 1, 2, 5, 10, 20, 50]."""
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    all_ticks = [round(m * 10.0 ** e, 12) for e in range(e0, e1 + 1) for m in (1, 2, 5)]
    first = max(t for t in all_ticks if t <= lo * (1 + 1e-9))
    last = min(t for t in all_ticks if t >= hi * (1 - 1e-9))
    ticks = [t for t in all_ticks if first <= t <= last]
    if math.log10(hi / lo) > decades_125:   # a 1-2-5 grid over many decades crowds the axis: powers of ten
        ticks = [round(10.0 ** e, 12) for e in range(e0, e1 + 1)]
    return ticks


def histogram(name: str, bins: list[tuple[str, float]], title: str, x_label: str, y_label: str = "episodes",
              width: int = 460, height: int = 220, color: str = COLORS[0]) -> str:
    """Vertical bars, one per (label, count); labels thinned to fit."""
    left, right, top, bottom = 44, 8, 10, 36
    pw, ph = width - left - right, height - top - bottom
    ticks = nice_ticks(max((v for _, v in bins), default=1) or 1)
    ymax = ticks[-1]
    bw = pw / max(1, len(bins))
    body = [f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">{escape(x_label)}</text>',
            f'<text transform="translate(11,{top + ph / 2}) rotate(-90)" text-anchor="middle">{escape(y_label)}</text>']
    for t in ticks:
        y = top + ph - ph * t / ymax
        body.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
                    f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    every = max(1, math.ceil(len(bins) / (pw / 28)))
    for i, (label, v) in enumerate(bins):
        x, h = left + i * bw, ph * v / ymax
        body.append(f'<rect class="mark" x="{x + 0.5:.1f}" y="{top + ph - h:.1f}" width="{max(1, bw - 1):.1f}" '
                    f'height="{h:.1f}" fill="{color}"><title>{escape(label)}: {v:,}</title></rect>')
        if i % every == 0:
            body.append(f'<text x="{x + bw / 2:.1f}" y="{top + ph + 14}" text-anchor="middle">{escape(label)}</text>')
    return _svg(name, width, height, body, title)


def stacked_shares(name: str, rows: list[tuple[str, dict]], keys: list[str], title: str,
                   colors: dict | None = None, width: int = 460) -> str:
    """One horizontal 100% bar per (label, {key: count}) row, with a legend."""
    colors = colors or dict(zip(keys, COLORS))
    left, right, bar, gap = 90, 10, 18, 8
    height = 30 + len(rows) * (bar + gap)
    pw = width - left - right
    body = []
    x = left
    for key in keys:
        body.append(f'<rect x="{x}" y="4" width="10" height="10" fill="{colors[key]}"/>'
                    f'<text x="{x + 14}" y="13">{escape(key)}</text>')
        x += 24 + 6.2 * len(key)   # ~6.2 px a character at 11 px
    for r, (label, counts) in enumerate(rows):
        y, total, x = 24 + r * (bar + gap), sum(counts.values()) or 1, left
        body.append(f'<text x="{left - 6}" y="{y + 13}" text-anchor="end">{escape(label)}</text>')
        for key in keys:
            w = pw * counts.get(key, 0) / total
            pct = 100 * counts.get(key, 0) / total
            body.append(f'<rect class="mark" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}" fill="{colors[key]}">'
                        f'<title>{escape(label)} {escape(key)}: {counts.get(key, 0):,} ({pct:.2f}%)</title></rect>')
            if w > 34:
                body.append(f'<text x="{x + w / 2:.1f}" y="{y + 13}" text-anchor="middle" fill="#fff">{pct:.1f}%</text>')
            x += w
    return _svg(name, width, height, body, title)


def quantiles(values: list[float], qs=(0.1, 0.25, 0.5, 0.75, 0.9)) -> list[float]:
    """Linear-interpolated quantiles: quantiles([1, 2, 3, 4], (0.5,)) -> [2.5]."""
    v = sorted(values)
    out = []
    for q in qs:
        pos = q * (len(v) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(v) - 1)
        out.append(v[lo] + (v[hi] - v[lo]) * (pos - lo))
    return out


def box_plot(name: str, groups: list[tuple[str, list[float]]], title: str, x_label: str, width: int = 460) -> str:
    """Horizontal box plots on a log x axis: whiskers p10-p90, box p25-p75, median line, geomean dot."""
    groups = [(g, vals) for g, vals in groups if vals]
    left, right, row, top = 96, 14, 22, 8
    height = top + len(groups) * row + 34
    pw = width - left - right
    lo = min((min(v) for _, v in groups), default=1)
    hi = max((max(v) for _, v in groups), default=10)
    ticks = log_ticks(max(lo, 1e-9), max(hi, lo * 10))
    l0, l1 = math.log10(ticks[0]), math.log10(ticks[-1])

    def px(v):
        return left + pw * (math.log10(max(v, ticks[0])) - l0) / (l1 - l0)

    base = top + len(groups) * row
    body = [f'<text x="{left + pw / 2}" y="{height - 4}" text-anchor="middle">{escape(x_label)}</text>']
    for t in ticks:
        body.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{top}" y2="{base}" stroke="#e5e5e5"/>'
                    f'<text x="{px(t):.1f}" y="{base + 14}" text-anchor="middle">{_fmt(t)}</text>')
    for i, (label, vals) in enumerate(groups):
        p10, p25, p50, p75, p90 = quantiles(vals)
        geo = math.exp(sum(math.log(v) for v in vals) / len(vals))
        y = top + i * row + row / 2
        color = COLORS[i % len(COLORS)]
        tip = (f"{label}: n={len(vals):,}, median {p50:.2f}x, geomean {geo:.2f}x, "
               f"p10-p90 {p10:.2f}-{p90:.2f}x")
        body.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>'
                    f'<line x1="{px(p10):.1f}" x2="{px(p90):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#777"/>'
                    f'<rect class="mark" x="{px(p25):.1f}" y="{y - 7:.1f}" width="{max(1, px(p75) - px(p25)):.1f}" '
                    f'height="14" fill="{color}" fill-opacity="0.55" stroke="{color}"><title>{escape(tip)}</title></rect>'
                    f'<line x1="{px(p50):.1f}" x2="{px(p50):.1f}" y1="{y - 7:.1f}" y2="{y + 7:.1f}" stroke="#222" stroke-width="2"/>'
                    f'<circle cx="{px(geo):.1f}" cy="{y:.1f}" r="2.5" fill="#222"/>')
    return _svg(name, width, height, body, title)


def band_chart(name: str, bands: list[list[float]], title: str, width: int = 220, height: int = 130,
               floor: float = 1e-3) -> str:
    """Best time / baseline against step on a log y axis: median line, p25-p75 and p10-p90 bands.

    bands[k] = [p10, p25, p50, p75, p90] at step k (k = 0 is the baseline, 1.0)."""
    left, right, top, bottom = 34, 6, 18, 18
    pw, ph = width - left - right, height - top - bottom
    lo = min(0.5, max(floor, min(b[0] for b in bands)))
    ticks = [t for t in log_ticks(lo, 1.0, decades_125=1.2) if t <= 1.0]
    l0 = math.log10(ticks[0])
    n = max(1, len(bands) - 1)

    def pt(k, v):
        return f"{left + pw * k / n:.1f},{top + ph * (math.log10(max(v, ticks[0]))) / l0:.1f}"

    def area(a, b):
        up = [pt(k, q[a]) for k, q in enumerate(bands)]
        down = [pt(k, q[b]) for k, q in reversed(list(enumerate(bands)))]
        return " ".join(up + down)

    body = [f'<text x="{left}" y="11" font-weight="600">{escape(title)}</text>',
            f'<text x="{left + pw}" y="{height - 4}" text-anchor="end">step {n}</text>']
    for t in ticks:
        y = top + ph * math.log10(t) / l0
        body.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                    f'<text x="{left - 3}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    body.append(f'<polygon points="{area(0, 4)}" fill="{COLORS[0]}" fill-opacity="0.15"/>'
                f'<polygon points="{area(1, 3)}" fill="{COLORS[0]}" fill-opacity="0.3"/>'
                f'<polyline class="mark" points="{" ".join(pt(k, q[2]) for k, q in enumerate(bands))}" fill="none" '
                f'stroke="{COLORS[0]}" stroke-width="1.8"><title>{escape(title)}: median best/baseline at step {n} '
                f'{bands[-1][2]:.3g} (p10 {bands[-1][0]:.3g}, p90 {bands[-1][4]:.3g})</title></polyline>')
    return _svg(name, width, height, body, title)


def hbars(name: str, rows: list[tuple[str, float]], title: str, width: int = 460) -> str:
    """One horizontal bar per (label, count), longest first as given, count at the bar's end."""
    left, right, bar, gap = 200, 50, 16, 5
    height = 8 + len(rows) * (bar + gap)
    pw = width - left - right
    top = max((v for _, v in rows), default=1) or 1
    body = []
    for i, (label, v) in enumerate(rows):
        y, w = 4 + i * (bar + gap), max(1.0, pw * v / top)
        color = COLORS[2] if label.startswith("compile") else COLORS[1]
        body.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{escape(label)}</text>'
                    f'<rect class="mark" x="{left}" y="{y}" width="{w:.1f}" height="{bar}" fill="{color}">'
                    f'<title>{escape(label)}: {v:,}</title></rect>'
                    f'<text x="{left + w + 4:.1f}" y="{y + 12}">{v:,}</text>')
    return _svg(name, width, height, body, title)
