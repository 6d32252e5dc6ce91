"""One run, set up and carried out: the setup (``setup.py``, ``stages.py``: inputs, partitions,
tokenizer, objective, packer, columns), the first pass (``first_pass.py``: split bounds, mixture
rates), the chain of stages for one partition (``pipeline.py``: read → tokenize → objective → pack
→ write; ``store_chain.py`` for a token store, ``documents.py`` for what a partition reads), token
stores and tokenized inputs as inputs (``stores.py``, ``token_inputs.py``), ``--append``,
``--provenance``, progress, the manifest (``finish.py``) and the summary line (``summary.py``).
``transform.py`` holds them together with the output folder's decisions."""
