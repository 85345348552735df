#!/usr/bin/env python3
"""Draws a W2 rate sweep as an SVG: offered rate against the rate each system completed, a filled
mark where the rate was sustainable (nothing lost, p99 within the bound, completions keeping up).

    python3 bench/plot_sweep.py docs/w2-sweep.csv docs/w2-sweep.svg

The CSV has a header and one row per point: series,run,offered,achieved,p99_ms,sustainable
(yes/no). Each run of a series is one line; a series has one colour. Python's standard library
only.
"""

import csv
import sys

WIDTH, HEIGHT = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 60, 170, 30, 50
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def read(path):
    """{series: {run: [(offered, achieved, sustainable)]}}"""
    series = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            point = (float(row["offered"]), float(row["achieved"]), row["sustainable"] == "yes")
            series.setdefault(row["series"], {}).setdefault(row["run"], []).append(point)
    return {name: {run: sorted(p) for run, p in runs.items()} for name, runs in series.items()}


def ticks(low, top, step):
    return [low + step * i for i in range(int((top - low) // step) + 1)]


def draw(series):
    top = max(
        max(o, a) for runs in series.values() for points in runs.values() for o, a, _ in points
    )
    low = min(
        min(o, a) for runs in series.values() for points in runs.values() for o, a, _ in points
    )
    step = 100 if top - low > 300 else 50
    top = (int(top // step) + 1) * step
    low = max(0, (int(low // step) - 1) * step)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(v):
        return LEFT + (v - low) / (top - low) * plot_w

    def y(v):
        return TOP + plot_h - (v - low) / (top - low) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
    ]
    for t in ticks(low, top, step):
        out.append(f'<line x1="{x(t)}" y1="{y(low)}" x2="{x(t)}" y2="{y(top)}" stroke="#eee"/>')
        out.append(f'<line x1="{x(low)}" y1="{y(t)}" x2="{x(top)}" y2="{y(t)}" stroke="#eee"/>')
        out.append(f'<text x="{x(t)}" y="{y(low) + 16}" text-anchor="middle">{t}</text>')
        out.append(f'<text x="{x(low) - 6}" y="{y(t) + 4}" text-anchor="end">{t}</text>')
    out.append(
        f'<line x1="{x(low)}" y1="{y(low)}" x2="{x(top)}" y2="{y(top)}" stroke="#999" '
        'stroke-dasharray="4 4"/>'
    )
    mid = (low + top) / 2
    out.append(
        f'<text x="{x(mid)}" y="{HEIGHT - 10}" text-anchor="middle">'
        "offered W2 rate (workflows/s)</text>"
    )
    out.append(
        f'<text transform="translate(16 {y(mid)}) rotate(-90)" text-anchor="middle">'
        "completed (workflows/s)</text>"
    )
    for i, (name, runs) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        for points in runs.values():
            path = " ".join(f"{x(o):.1f},{y(a):.1f}" for o, a, _ in points)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-opacity="0.6"/>'
            )
            for o, a, ok in points:
                fill = colour if ok else "white"
                out.append(
                    f'<circle cx="{x(o):.1f}" cy="{y(a):.1f}" r="4" fill="{fill}" '
                    f'stroke="{colour}"/>'
                )
        ly = TOP + 10 + i * 20
        out.append(f'<line x1="{WIDTH - RIGHT + 15}" y1="{ly}" x2="{WIDTH - RIGHT + 35}" '
                   f'y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 40}" y="{ly + 4}">{name}</text>')
    ly = TOP + 10 + len(series) * 20 + 10
    out.append(f'<text x="{WIDTH - RIGHT + 15}" y="{ly}" font-size="11">filled: sustainable</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_sweep.py SWEEP.csv OUT.svg")
    with open(sys.argv[2], "w") as f:
        f.write(draw(read(sys.argv[1])))


if __name__ == "__main__":
    main()
