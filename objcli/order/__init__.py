"""What decides the order and membership of rows across a run: the global row shuffle, held-out
splits, weighted mixtures, and the first pass over the inputs that sizes splits and mixtures."""
