"""One run beyond its plan (``transform.py``): the chain of stages for one partition
(``pipeline.py``: read → tokenize → objective → pack → write), the checks on the run's inputs,
and the summary line."""
