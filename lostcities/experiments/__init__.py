"""Experiment sweeps: ``python -m lostcities.train -m +experiment=<name>`` (conf/experiment/).

``launch`` runs each job of a sweep as a fresh ``python -m lostcities.train``
process, under Hydra's basic launcher (one at a time) or a launcher plugin
(``hydra/launcher=submitit_local``, ``submitit_slurm``); ``callback`` is the Hydra
callback that opens the sweep's parent MLflow run and, when the sweep ends, writes and
logs its A/B and drift report: ``report`` assembles it from the sweep's ``jobs`` (records
and timings), their parity ``statistics`` and the ``protocols`` of the verdicts, and
``render`` writes it as markdown and plots.
"""
