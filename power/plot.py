"""A PNG of a power run: the watts trace of each phase, LoadGen's measured window shaded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.pyplot as plt

from bench.power_metric import LoadgenWindow
from power.protocol import Sample


@dataclass(frozen=True)
class PhaseTrace:
    """One phase to draw: its samples and, when known, LoadGen's window."""

    name: str
    samples: list[Sample]
    window: LoadgenWindow | None
    avg_power_w: float | None = None


def plot_power(phases: list[PhaseTrace], path: Path, title: str) -> Path:
    """Draw one panel per phase (seconds from the phase's first sample) into path."""
    fig, axes = plt.subplots(len(phases), 1, figsize=(9, 3 * len(phases)), squeeze=False)
    for ax, phase in zip(axes[:, 0], phases, strict=True):
        _draw(ax, phase)
    axes[-1, 0].set_xlabel("seconds")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _draw(ax: plt.Axes, phase: PhaseTrace) -> None:
    if not phase.samples:
        ax.set_title(f"{phase.name}: no samples")
        return
    start = phase.samples[0].time
    xs = [(s.time - start).total_seconds() for s in phase.samples]
    ax.plot(xs, [s.watts for s in phase.samples], marker=".", linewidth=1, label="watts")
    if phase.window is not None:
        ax.axvspan((phase.window.power_begin - start).total_seconds(),
                   (phase.window.power_end - start).total_seconds(),
                   alpha=0.2, color="tab:orange", label="LoadGen run (power_begin..end)")
    if phase.avg_power_w is not None:
        ax.axhline(phase.avg_power_w, linestyle="--", color="tab:green",
                   label=f"average in window {phase.avg_power_w:.1f} W")
    ax.set_title(phase.name)
    ax.set_ylabel("W")
    ax.legend(loc="best", fontsize="small")
