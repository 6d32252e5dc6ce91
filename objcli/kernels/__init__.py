"""Pure NumPy kernels: no I/O, no global state, vectorized over whole batches."""
