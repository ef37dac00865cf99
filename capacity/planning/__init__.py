"""Capacity planning on top of the simulator: the stack adapter (`stack`, the only module that reads
settings), runs and their summaries (`run`), the candidates every search evaluates and the one
worker pool that evaluates them (`evaluator`), and the searches and reports built on them
(`plan`, `tune`, `sensitivity`, `schedule`, `evidence`, `audit`, `journal`, `report`)."""
