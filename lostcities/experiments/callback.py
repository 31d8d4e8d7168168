"""The Hydra callback of the experiment sweeps (conf/experiment/ registers it under
``hydra.callbacks``): it opens the sweep's parent MLflow run, and writes and logs the report
when the sweep ends.

Both hooks run in the launching process, also when a launcher plugin runs the jobs
elsewhere (lostcities/experiments/launch.py): the start before any job is submitted, the
end after the launcher has returned every job. MLflow is reached through lostcities.tracking
only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from lostcities.config import ExperimentConfig, TrackingConfig
from lostcities.experiments.launch import (
    SweepGuard,
    end_sweep,
    report_stopped_jobs,
    settings,
    stopped_jobs,
)
from lostcities.experiments.render import plot, render_markdown
from lostcities.experiments.report import build_report


class SweepReport(Callback):
    """At the start of a multirun, the parent MLflow run the arms nest under; at the end,
    ``report.md``, ``report.json`` and PNG plots in the sweep directory, logged to the parent
    run, or, where a job did not finish, one line naming it in place of the report. Hydra
    turns an exception of a callback into a warning; the sweep's exit code comes from
    ``SystemExit``, which it lets through."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from lostcities.tracking import start_parent_run

        exp, tracking = _typed(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        command = settings(list(config.hydra.overrides.task))
        name = f"{exp.name}" + (f" [{' '.join(command)}]" if command else "")
        parent = start_parent_run(
            tracking, name, {"experiment": exp.name, "sweep_dir": str(sweep_dir)}
        )
        self._guard = SweepGuard(tracking, sweep_dir)
        self._guard.open(parent, name)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        exp, tracking = _typed(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        # Only a launcher plugin's jobs get here after failing (the basic launcher's first
        # failure stops the sweep): their exit codes are in their arm.json.
        stopped = stopped_jobs(sweep_dir)
        if stopped:
            code = report_stopped_jobs(tracking, sweep_dir, stopped)
            self._guard.close()
            raise SystemExit(code)
        report = build_report(exp, sweep_dir, settings(list(config.hydra.overrides.task)))
        markdown = render_markdown(report)
        (sweep_dir / "report.json").write_text(json.dumps(report, indent=1))
        (sweep_dir / "report.md").write_text(markdown)
        files = [sweep_dir / "report.md", sweep_dir / "report.json", *plot(report, sweep_dir)]
        end_sweep(tracking, sweep_dir, "FINISHED", summary_metrics(report), files)
        self._guard.close()
        print(f"report: {sweep_dir / 'report.md'}", flush=True)
        print(markdown.split("## Verdict")[-1].strip(), flush=True)


def summary_metrics(report: dict[str, Any]) -> dict[str, float]:
    """What the parent run logs of each arm: its mean iteration and training seconds, its
    effect, and whether its curves and parity passed."""
    metrics = {}
    for arm in report["arms"]:
        metrics[f"arm{arm['arm']}/iteration_seconds"] = arm["mean_seconds"]["iteration"]
        metrics[f"arm{arm['arm']}/training_seconds"] = arm["mean_seconds"]["training"]
        metrics[f"arm{arm['arm']}/effect"] = arm["effect_mean"]
        metrics[f"arm{arm['arm']}/drift_passed"] = float(arm["drift_passed"])
        metrics[f"arm{arm['arm']}/parity_passed"] = float(arm["parity_passed"])
    return metrics


def _typed(config: DictConfig) -> tuple[ExperimentConfig, TrackingConfig]:
    """The sweep's experiment and tracking sections as the checked dataclasses."""
    return OmegaConf.to_object(config.experiment), OmegaConf.to_object(config.tracking)
