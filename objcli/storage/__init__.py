"""Where a run's bytes live: local folders and object-storage prefixes (stores, URLs), the output
folder's lifecycle (locks, completion markers, final names), the manifest, reading shards back,
atomic files and the fault-injection hook the reliability tests use."""
