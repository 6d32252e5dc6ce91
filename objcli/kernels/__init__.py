"""Pure NumPy kernels: no I/O, no global state, vectorized over whole batches."""

IGNORE = -100  # Hugging Face's "no loss here", in every labels column
PADDING_DOC = -1  # the document id of padding, in per-token document ids
