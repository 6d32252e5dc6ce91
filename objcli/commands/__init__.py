"""The commands besides ``transform`` and ``tokenize`` (``cli.py``): over an output folder, ``inspect``
(``show.py``), ``verify``, ``stats``, ``trace``, ``merge`` and ``reshard`` (``reshard_rows.py``,
``reshard_stream.py``; both rebuild through ``rebuild.py``), their Click definitions in
``folder_commands.py``; and ``export-tokenizer``, ``train-tokenizer`` (with the progress it reads from
SentencePiece's log, ``training_log.py``). None is imported by the stages of a run."""
