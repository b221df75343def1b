"""The paper's studies (toy, synthetic, UCI): cached cell grids, tables, claims, report.

Run them with ``relaxep reproduce toy|synthetic|uci|all --out DIR`` or
:func:`relaxep.experiments.reproduce.reproduce`.
"""
