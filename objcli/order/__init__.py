"""What decides the order and membership of rows across a run: the global row shuffle
(``shuffle.py``), the document shuffle window (``document_windows.py``), held-out splits
(``splits.py``) and weighted mixtures with their blend for Megatron (``mixture.py``). The first pass
that sizes splits and mixtures is ``run/first_pass.py``."""
