"""The HTTP benchmark's figures as pictures: req/s by case, and latency by page depth.

http_bench.py draws them with ``--charts DIR``; this draws them again from a saved report:

    python bench/charts.py bench/results/1000000.json docs/img 1M

(a report of bench/run.py holds the HTTP figures under "http"). Matplotlib draws off
screen (Agg); nothing else is needed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BARE = "bare Flask view, same body"


def draw(report: dict, folder: Path, label: str = "") -> list[Path]:
    """Both charts of one http_bench report into ``folder``; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    suffix = f"-{label}" if label else ""
    return [rps_by_case(report, folder / f"http{suffix}-rps.png", label),
            latency_by_depth(report, folder / f"http{suffix}-depth.png", label)]


def rps_by_case(report: dict, path: Path, label: str = "") -> Path:
    """Horizontal bars, one per case (medians of the rounds), each with its ratio to the
    bare view."""
    cases = report["cases"]
    names = list(cases)[::-1]  # matplotlib draws the first bar at the bottom
    values = [cases[name]["rps"] for name in names]
    bare = cases[BARE]["rps"]
    figure, axes = plt.subplots(figsize=(10, 0.45 * len(names) + 1.6))
    colours = ["#888888" if name == BARE or "ceiling" in name
               else "#2b6cb0" if "cache on" in name else "#dd6b20" for name in names]
    bars = axes.barh(names, values, color=colours)
    for bar, value in zip(bars, values, strict=True):
        axes.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                  f" {value:,.0f} ({value / bare:.2f})", va="center", fontsize=8)
    axes.set_xlabel("requests per second (median of rounds); in brackets: over the bare view")
    axes.set_xlim(0, max(values) * 1.25)
    axes.set_title(_title("Requests per second by case", report, label))
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def latency_by_depth(report: dict, path: Path, label: str = "") -> Path:
    """p50 and p99 latency (ms) of the whole site's list against the page number (log
    scale), response cache off."""
    pages = report["depth"]["pages"]
    numbers = [report["num_pages"] if page == "last" else int(page) for page in pages]
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for key, name in (("p50_ms", "p50"), ("p99_ms", "p99")):
        axes.plot(numbers, [pages[page][key] for page in pages], marker="o", label=name)
    axes.set_xscale("log")
    axes.set_xlabel("page number of the whole site's list (last page at the right)")
    axes.set_ylabel("latency, ms")
    axes.set_ylim(bottom=0)
    axes.legend()
    axes.grid(True, alpha=0.3)
    axes.set_title(_title("Latency by page depth, cache off", report, label,
                          f"{report['depth']['duration_s']} s per page, once"))
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _title(what: str, report: dict, label: str, timing: str = "") -> str:
    where = f"{int(label):,} comments, " if label.isdigit() else (f"{label}, " if label else "")
    rounds = report["rounds"]
    timing = timing or f"{report['duration_s']} s x {rounds} round{'s' if rounds != 1 else ''}"
    return (f"{what}\n{where}{report['workers']} {report['worker_class']} workers, "
            f"{report['connections']} connections, {timing}")


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    report = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    for path in draw(report.get("http", report), Path(sys.argv[2]),
                     sys.argv[3] if len(sys.argv) > 3 else ""):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
