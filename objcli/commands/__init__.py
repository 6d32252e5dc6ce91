"""The commands besides ``transform``: ``inspect`` (show), ``verify``, ``stats``, ``export-tokenizer``,
``train-tokenizer`` (and the progress it reads from SentencePiece's log). They read outputs; none
is imported by the stages of a run."""
