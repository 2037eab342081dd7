"""One GPT training loop per framework, all on the same architecture, initialization
scheme, batches and AdamW hyperparameters (see ``benchmarks/common.py``)."""
