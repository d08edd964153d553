"""The study engine: a YAML design study -> design points -> one row of metrics each -> Parquet, tables, SQL.

Modules, one job each (imports point down this list; none imports a command module):

``point``      :class:`~cli.study.point.DesignPoint`, its workload and fault scenario, its stable id
``store``      the output folder: hive-partitioned Parquet written atomically, one writer, the row schema version
``registry``   the metric registry: :func:`~cli.study.registry.register_metric`, :data:`~cli.study.registry.METRICS`
``context``    what a metric sees of a point: :class:`~cli.study.context.PointContext`, the per-batch Fabric cache
``metrics``    the shipped metrics (cost, build, faults, orchestrator, mfu, rl, goodput, ...), one adapter each
``evaluator``  one row per point, and batches of points (the task a worker runs)
``spec``       read and validate a study spec, expand it into points
``progress``   progress on stderr: a bar on a terminal, a line per batch in a log
``runner``     :func:`~cli.study.runner.run_study`: batches on this process, a process pool or Dask, into the folder
``report``     the per-architecture comparison of a sweep's rows and its tables
``report_data`` what the study report page shows (designs, quality axes, costs by scope, BOM, tornado)
``sql``        DuckDB SQL over a sweep folder

It sits in ``cli/`` because it needs topologies, solvers and workloads (DESIGN's layers); the commands
``fabric sweep`` and ``fabric results`` (:mod:`cli.sweep`) only parse, call it and print.
"""
